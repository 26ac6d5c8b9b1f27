// An app's deletion requests (docs/storage.md §7), a section of its Admin
// page: the list from GET /api/apps/{app}/deletions (an admin key), newest
// first — request id, kind, requested at, status (pending or done), done
// at, suppress; never the ids erased — and "Erase a person": a distinct
// id, a suppress checkbox and a confirmation step that asks for the id to
// be typed again (there is no undo), then DELETE
// /api/apps/{app}/persons/{id}[?suppress=true] and the list read again.

import { html, useEffect, useState } from '../lib/html.js';
import { api } from '../lib/api.js';
import { ErrorBox } from './result.js';

// utc shows an RFC 3339 UTC time to the second: "2026-11-28 13:29:15".
const utc = (t) => (t ? t.replace('T', ' ').replace(/(\.\d+)?Z$/, '') : '–');

// Deletions is the section; give it key=app so that another app starts
// with an empty form.
export function Deletions({ app }) {
  const [list, setList] = useState(null);
  const [err, setErr] = useState(null);
  const [reads, setReads] = useState(0);
  useEffect(() => {
    setErr(null);
    api.deletions(app).then((ds) => setList([...ds].reverse()), setErr);
  }, [app, reads]);
  return html`<section class="deletions" aria-label="Deletions">
    <h2>Deletions</h2>
    <p class="hint">Requests to erase a person (GDPR Art. 17): queries leave the person out as soon as it is requested;
      its bytes leave the store's files within <code>spur serve --erase-within</code> (24 h by default), or at once with
      <code>spur compact --erase</code>, and the request is then done. The list names no erased id.</p>
    ${err ? html`<${ErrorBox} err=${err} />` : null}
    ${list ? (list.length ? html`<table class="grid deletions" data-testid="deletions"><thead><tr>
        <th>Request</th><th>Kind</th><th>Requested at (UTC)</th><th>Status</th><th>Done at (UTC)</th><th>Suppress</th></tr></thead>
      <tbody>${list.map((d) => html`<tr data-id=${d.id} data-status=${d.status}><td data-col="id"><code>${d.id}</code></td>
        <td data-col="kind">${d.kind}</td><td class="time" data-col="requested">${utc(d.requested_at)}</td>
        <td data-col="status">${d.status}</td><td class="time" data-col="done">${utc(d.done_at)}</td>
        <td data-col="suppress">${d.suppress ? 'yes' : ''}</td></tr>`)}</tbody></table>`
      : html`<p class="empty">No deletion was requested.</p>`) : err ? null : html`<p class="loading">Loading…</p>`}
    <${ErasePerson} app=${app} onDone=${() => setReads((n) => n + 1)} />
  </section>`;
}

// ErasePerson asks for a distinct id and suppress, then for the id typed
// again, and requests the erasure; onDone runs after a request is made.
function ErasePerson({ app, onDone }) {
  const [id, setId] = useState('');
  const [suppress, setSuppress] = useState(false);
  const [confirming, setConfirming] = useState(false);
  const [typed, setTyped] = useState('');
  const [busy, setBusy] = useState(false);
  const [err, setErr] = useState(null);
  const [made, setMade] = useState(null);
  const ask = (e) => {
    e.preventDefault();
    if (!id) return;
    setErr(null);
    setMade(null);
    setTyped('');
    setConfirming(true);
  };
  const cancel = () => { setConfirming(false); setTyped(''); };
  const erase = async (e) => {
    e.preventDefault();
    if (typed !== id) return;
    setBusy(true);
    setErr(null);
    try {
      setMade({ ...(await api.erasePerson(app, id, { suppress })), asked: id });
      setId('');
      setSuppress(false);
      setConfirming(false);
      setTyped('');
      onDone();
    } catch (e) {
      setErr(e);
    } finally {
      setBusy(false);
    }
  };
  return html`<section class="danger erase-person" aria-label="Erase a person">
    <h3>Erase a person</h3>
    ${confirming ? html`<form onSubmit=${erase}>
        <p>Erase every event and property of every distinct id of the person of <code data-testid="erase-id">${id}</code>
          ${suppress ? html`, and drop the events its ids send from now on` : null}? There is no undo.
          Type the id again to confirm.</p>
        <p class="row"><input aria-label="Distinct id to confirm" autocomplete="off" value=${typed} onInput=${(e) => setTyped(e.target.value)} placeholder=${id} />
          <button type="submit" class="primary danger" disabled=${busy || typed !== id}>Erase the person</button>
          <button type="button" class="secondary" onClick=${cancel} disabled=${busy}>Cancel</button></p>
      </form>`
      : html`<form onSubmit=${ask}>
        <p class="row"><input aria-label="Distinct id to erase" autocomplete="off" placeholder="any distinct id of the person" value=${id}
            onInput=${(e) => setId(e.target.value)} />
          <button type="submit" class="secondary" disabled=${!id}>Erase…</button></p>
        <p><label class="inline"><input type="checkbox" aria-label="Suppress" checked=${suppress} onChange=${(e) => setSuppress(e.target.checked)} />
          Suppress: also drop the events its ids send from now on (without it, they make a new person)</label></p>
      </form>`}
    ${made ? html`<p class="note" data-testid="erase-made">Erasure of <code>${made.asked}</code> requested: <code>${made.id}</code>, ${made.status}.</p>` : null}
    ${err ? html`<${ErrorBox} err=${err} />` : null}
  </section>`;
}
