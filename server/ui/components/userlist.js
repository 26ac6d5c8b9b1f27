// The drill-down panel: the persons behind a number (a query's list, spec
// §7; docs/identity.md §1), paged, with their current properties and, for a
// person of several distinct ids, a "+N ids" hint naming them; each links
// to the person's page.

import { html, useEffect, useState } from '../lib/html.js';
import { api } from '../lib/api.js';
import { num } from '../lib/format.js';

// PropChips renders a properties object as name = value chips.
export const PropChips = ({ props }) => html`<span class="chips">${Object.entries(props || {}).map(([k, v]) =>
  html`<span class="chip-prop"><span class="k">${k}</span> ${String(v)}</span>`)}</span>`;

// personURL is the UI path of the person page of distinct id id in app.
export const personURL = (app, id) => `/apps/${encodeURIComponent(app)}/persons/${encodeURIComponent(id)}`;

// IdsHint shows, for a person of more than one distinct id, "+N ids" (N
// the ids other than the person id) with all of them in its tooltip.
export function IdsHint({ id, ids }) {
  if (!ids || ids.length < 2) return null;
  const n = ids.filter((d) => d !== id).length;
  const all = ids.join(', ');
  return html`<span class="ids-hint" data-testid="ids-hint" title=${all} aria-label=${`distinct ids: ${all}`}>+${n} id${n === 1 ? '' : 's'}</span>`;
}

// entry reads one list.user_ids entry: a person id, or {id, distinct_ids}
// (a list asked with "distinct_ids": true).
const entry = (e) => (typeof e === 'string' ? { id: e, ids: null } : { id: e.id, ids: e.distinct_ids || null });

// UserList shows list {users, user_ids, offset, limit}; onPage(offset)
// asks for another page, onClose closes the panel. A person's distinct
// ids come from the list's entries, else from GET /users.
export function UserList({ app, list, title, onPage, onClose, busy }) {
  const [people, setPeople] = useState({}); // person id → {properties, distinct_ids}
  const rows = (list.user_ids || []).map(entry);
  const ids = rows.map((r) => r.id);
  useEffect(() => {
    if (!ids.length) return undefined;
    let live = true;
    api.users(app, ids).then((us) => {
      if (live) setPeople(Object.fromEntries(us.map((u) => [u.user_id, u])));
    }).catch(() => {});
    return () => { live = false; };
  }, [app, ids.join('\n')]);
  const from = list.offset + 1, to = list.offset + ids.length;
  return html`<section class="userlist" aria-label="Users" data-users=${list.users}>
    <header>
      <h3><span class="count" data-testid="list-count">${num(list.users)}</span> users${title ? html` <span class="muted">· ${title}</span>` : null}</h3>
      ${onClose ? html`<button type="button" class="icon" aria-label="Close the user list" onClick=${onClose}>×</button>` : null}
    </header>
    ${rows.length ? html`<table class="grid users"><thead><tr><th>Person</th><th>Properties</th></tr></thead><tbody>
      ${rows.map(({ id, ids: dids }) => html`<tr data-user=${id}><td><a href=${personURL(app, id)}>${id}</a>
          <${IdsHint} id=${id} ids=${dids || people[id]?.distinct_ids} /></td>
        <td>${people[id] ? html`<${PropChips} props=${people[id].properties} />` : html`<span class="muted">…</span>`}</td></tr>`)}
    </tbody></table>` : html`<p class="empty">No users.</p>`}
    <nav class="pager" aria-label="User pages">
      <button type="button" disabled=${busy || list.offset === 0} onClick=${() => onPage(Math.max(0, list.offset - list.limit))}>‹ Previous</button>
      <span>${ids.length ? `${num(from)}–${num(to)} of ${num(list.users)}` : ''}</span>
      <button type="button" disabled=${busy || to >= list.users} onClick=${() => onPage(list.offset + list.limit)}>Next ›</button>
    </nav>
  </section>`;
}
