// The drill-down panel: the users behind a number (a query's list, spec
// §7), paged, with their current properties, each linking to their trail.

import { html, useEffect, useState } from '../lib/html.js';
import { api } from '../lib/api.js';
import { num } from '../lib/format.js';

// PropChips renders a properties object as name = value chips.
export const PropChips = ({ props }) => html`<span class="chips">${Object.entries(props || {}).map(([k, v]) =>
  html`<span class="chip-prop"><span class="k">${k}</span> ${String(v)}</span>`)}</span>`;

// UserList shows list {users, user_ids, offset, limit}; onPage(offset)
// asks for another page, onClose closes the panel.
export function UserList({ app, list, title, onPage, onClose, busy }) {
  const [props, setProps] = useState({});
  const ids = list.user_ids || [];
  useEffect(() => {
    if (!ids.length) return;
    let live = true;
    api.users(app, ids).then((us) => {
      if (live) setProps(Object.fromEntries(us.map((u) => [u.user_id, u.properties])));
    }).catch(() => {});
    return () => { live = false; };
  }, [app, ids.join('\n')]);
  const from = list.offset + 1, to = list.offset + ids.length;
  return html`<section class="userlist" aria-label="Users" data-users=${list.users}>
    <header>
      <h3><span class="count" data-testid="list-count">${num(list.users)}</span> users${title ? html` <span class="muted">· ${title}</span>` : null}</h3>
      ${onClose ? html`<button type="button" class="icon" aria-label="Close the user list" onClick=${onClose}>×</button>` : null}
    </header>
    ${ids.length ? html`<table class="grid users"><thead><tr><th>User</th><th>Properties</th></tr></thead><tbody>
      ${ids.map((id) => html`<tr data-user=${id}><td><a href=${`/apps/${encodeURIComponent(app)}/users/${encodeURIComponent(id)}`}>${id}</a></td>
        <td>${props[id] ? html`<${PropChips} props=${props[id]} />` : html`<span class="muted">…</span>`}</td></tr>`)}
    </tbody></table>` : html`<p class="empty">No users.</p>`}
    <nav class="pager" aria-label="User pages">
      <button type="button" disabled=${busy || list.offset === 0} onClick=${() => onPage(Math.max(0, list.offset - list.limit))}>‹ Previous</button>
      <span>${ids.length ? `${num(from)}–${num(to)} of ${num(list.users)}` : ''}</span>
      <button type="button" disabled=${busy || to >= list.users} onClick=${() => onPage(list.offset + list.limit)}>Next ›</button>
    </nav>
  </section>`;
}
