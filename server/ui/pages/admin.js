// The app's admin page (docs/storage.md §7, §8): the app's size — events,
// users rows, segments and bytes, its time range, from GET /api/apps —,
// its events' retention (PATCH /api/apps/{app} {"retention": "400d"}, an
// admin key), its deletion requests and erasing a person
// (components/deletions.js), and deleting the app (DELETE
// /api/apps/{app}, an admin key), which asks for the app's name to be
// typed first: it removes the app whole and revokes its keys, with no
// undo but a backup.

import { html, useState } from '../lib/html.js';
import { useApp } from '../lib/appctx.js';
import { api } from '../lib/api.js';
import { num } from '../lib/format.js';
import { ErrorBox } from '../components/result.js';
import { Deletions } from '../components/deletions.js';

const day = (us) => (us ? new Date(us / 1000).toISOString().slice(0, 10) : '–');
const mib = (b) => (b / (1 << 20)).toFixed(1) + ' MiB';

// AdminPage is routed at /apps/:app/admin.
export function AdminPage() {
  const { app, apps } = useApp();
  const a = apps.find((x) => x.name === app);
  const [typed, setTyped] = useState('');
  const [err, setErr] = useState(null);
  const [busy, setBusy] = useState(false);
  const [retention, setRetention] = useState(null); // as saved by this page, else the apps list's
  const [typedRet, setTypedRet] = useState('');
  const [retErr, setRetErr] = useState(null);
  const current = retention || a?.retention || 'none';
  const saveRetention = async (value) => {
    setRetErr(null);
    try {
      const s = await api.setRetention(app, value.trim() || 'none');
      setRetention(s.retention);
      setTypedRet('');
    } catch (e) {
      setRetErr(e);
    }
  };
  const del = async () => {
    setBusy(true);
    setErr(null);
    try {
      await api.deleteApp(app);
      location.assign('/'); // the apps are read again
    } catch (e) {
      setErr(e);
      setBusy(false);
    }
  };
  return html`<main class="page admin-page">
    <h1>${app}</h1>
    ${a ? html`<table class="facts" aria-label="Size">
      <tr><th>Events</th><td data-testid="events">${num(a.events)}</td></tr>
      <tr><th>Users rows</th><td>${num(a.user_rows)}</td></tr>
      <tr><th>Segments</th><td>${num(a.segments)}</td></tr>
      <tr><th>Stored</th><td data-testid="bytes">${mib(a.bytes)}</td></tr>
      <tr><th>Events from</th><td>${day(a.min_time)} to ${day(a.max_time)}</td></tr>
    </table>` : null}
    <section aria-label="Retention">
      <h2>Retention</h2>
      <p>Events kept: <b data-testid="retention">${current === 'none' ? 'all (no retention)' : 'the last ' + current}</b>.
        Queries see only events newer than that, older events sent live are rejected and imports skip them;
        their files go at the next compaction. First-time analyses (retention's first event, lifecycle's new,
        attribution's first touch) see only the kept events.</p>
      <p class="row"><input aria-label="Retention" value=${typedRet} onInput=${(e) => setTypedRet(e.target.value)} placeholder="400d, 36h or none" />
        <button onClick=${() => saveRetention(typedRet)} disabled=${!typedRet.trim()}>Set retention</button>
        ${current !== 'none' ? html`<button class="link" onClick=${() => saveRetention('none')}>Keep everything</button>` : null}</p>
      ${retErr ? html`<${ErrorBox} err=${retErr} />` : null}
    </section>
    <p class="hint">A backup of the whole store: <code>spur backup --to DIR --url ${location.origin}</code> (docs/storage.md §8).
      Deleting events by predicate: <code>spur events delete</code> or <code>POST /api/apps/${app}/delete</code> (docs/storage.md §7).</p>
    <${Deletions} key=${app} app=${app} />
    <section class="danger" aria-label="Delete the app">
      <h2>Delete this app</h2>
      <p>Removes every event, user, person and saved insight, dashboard and cohort of <b>${app}</b>, and revokes its keys.
        There is no undo but a backup. Type the app's name to confirm.</p>
      <p class="row"><input aria-label="App name to confirm" value=${typed} onInput=${(e) => setTyped(e.target.value)} placeholder=${app} />
        <button class="primary danger" onClick=${del} disabled=${busy || typed !== app}>Delete ${app}</button></p>
      ${err ? html`<${ErrorBox} err=${err} />` : null}
    </section>
  </main>`;
}
