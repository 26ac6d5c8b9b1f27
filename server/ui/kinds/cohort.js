// Cohort (docs/analytics.md §7): the users who meet a condition tree, counted and
// listed (paged, with their properties), and saved by name.

import { html, useState } from '../lib/html.js';
import { useApp } from '../lib/appctx.js';
import { api } from '../lib/api.js';
import { num } from '../lib/format.js';

import { CohortField } from '../components/common.js';
import { UserList } from '../components/userlist.js';
import { ErrorBox } from '../components/result.js';
import { refreshSaved } from '../components/cohort.js';

function Builder({ q, onChange }) {
  return html`<${CohortField} q=${q} onChange=${onChange} title="Users who" required />
    <${SaveCohort} q=${q} />`;
}

// SaveCohort saves the builder's condition tree as a named cohort, which
// any query can then use by name.
function SaveCohort({ q }) {
  const { app } = useApp();
  const [name, setName] = useState(typeof q.cohort === 'string' ? q.cohort : '');
  const [msg, setMsg] = useState(null);
  const save = async () => {
    setMsg(null);
    const body = { name, definition: q.cohort };
    try {
      let existing = null;
      try { existing = await api.get(app, 'cohorts', name); } catch { /* a new name */ }
      if (existing) await api.update(app, 'cohorts', name, existing.version, body);
      else await api.create(app, 'cohorts', body);
      refreshSaved(app);
      setMsg({ ok: `Saved as "${name}"${existing ? ` (version ${existing.version + 1})` : ''}.` });
    } catch (err) {
      setMsg({ err });
    }
  };
  if (typeof q.cohort === 'string' || !q.cohort) return null;
  return html`<fieldset><legend>Save this cohort</legend>
    <div class="row"><input aria-label="Cohort name" placeholder="name: a-z, 0-9, _ and -" value=${name} onInput=${(e) => setName(e.target.value)} />
      <button type="button" class="secondary" disabled=${!name} onClick=${save}>Save cohort</button></div>
    ${msg?.ok ? html`<p class="ok" role="status">${msg.ok}</p>` : null}
    ${msg?.err ? html`<${ErrorBox} err=${msg.err} />` : null}
  </fieldset>`;
}

function Result({ q, res, page, compact }) {
  const { app } = useApp();
  const list = { users: res.users, user_ids: res.user_ids, offset: res.offset, limit: res.limit };
  return html`<div class="big-number" data-testid="cohort-size"><span class="n">${num(res.users)}</span> users in the cohort</div>
    ${compact ? null : html`<${UserList} app=${app} list=${list} onPage=${page ? (offset) => page(offset) : null} />`}`;
}

export default {
  kind: 'cohort', label: 'Cohort',
  fields: ['list'],
  common: { where: false, breakdown: false, cohort: false },
  defaults: () => ({ cohort: { performed: { event: '$any' }, count: { op: 'gte', value: 1 } }, list: { limit: 50, offset: 0 } }),
  // Carry the cohort filter of another analysis into the cohort page.
  from: (q) => (q.cohort !== undefined ? { cohort: q.cohort } : {}),
  Builder, Result,
};

