// The app's persons page (identity.md): find a person by any of its
// distinct ids, and the merges the app's id graph refused (§2: an
// identify or alias that would have joined an identified person into
// another), newest first, paged (?offset=N), from GET
// /api/apps/{app}/warnings?kind=identity.

import { html, useEffect, useState } from '../lib/html.js';
import { useLocation } from '../vendor/preact-iso-router.js';
import { useApp } from '../lib/appctx.js';
import { api } from '../lib/api.js';
import { num } from '../lib/format.js';
import { ErrorBox } from '../components/result.js';
import { personURL } from '../components/userlist.js';

const LIMIT = 100;

// PersonsPage is routed at /apps/:app/persons.
export function PersonsPage() {
  const { app } = useApp();
  const loc = useLocation();
  const offset = Number(loc.query.offset) || 0;
  const [find, setFind] = useState('');
  const [page, setPage] = useState(null);
  const [err, setErr] = useState(null);
  useEffect(() => {
    setPage(null);
    setErr(null);
    api.warnings(app, 'identity', { offset, limit: LIMIT }).then(setPage, setErr);
  }, [app, offset]);
  const url = (o) => `${loc.path}?offset=${o}`;
  const submit = (e) => {
    e.preventDefault();
    if (find.trim()) loc.route(personURL(app, find.trim()));
  };
  const ws = page?.warnings || [];
  return html`<main class="page persons-page">
    <h1>Persons</h1>
    <form class="row find-person" onSubmit=${submit}>
      <input aria-label="Distinct id" placeholder="any distinct id of a person" value=${find} onInput=${(e) => setFind(e.target.value)} />
      <button type="submit" class="secondary">Open person</button>
    </form>
    <section aria-label="Refused merges"><h2>Refused merges ${page ? html`<span class="muted"><span data-testid="refused-total">${num(page.total)}</span> in all</span>` : null}</h2>
      <p class="hint">Identity operations whose merge was not allowed: an identify whose anonymous id already belongs to another
        identified person, or an alias of two identified persons. Nothing merged; the target id was marked identified.
        <code>POST /api/apps/${app}/persons/merge</code> (or <code>spur persons merge</code>) forces one.</p>
      ${err ? html`<${ErrorBox} err=${err} />` : null}
      ${page ? (ws.length ? html`<table class="grid refused" data-testid="refused"><thead><tr>
          <th class="num">Seq</th><th>Time (UTC)</th><th>Operation</th><th>Ids (target, other)</th><th>Reason</th></tr></thead>
        <tbody>${ws.map((w) => html`<tr data-seq=${w.seq}><td class="num">${w.seq}</td>
          <td class="time">${w.time ? w.time.replace('T', ' ').replace('Z', '') : '–'}</td><td data-col="op">${w.op}</td>
          <td data-col="ids">${(w.ids || []).map((id, i) => html`${i ? ', ' : ''}<a href=${personURL(app, id)} data-id=${id}>${id}</a>`)}</td>
          <td data-col="reason">${w.reason}</td></tr>`)}</tbody></table>
        <nav class="pager" aria-label="Refused merge pages">
          ${offset > 0 ? html`<a href=${url(Math.max(0, offset - LIMIT))}>‹ Newer</a>` : html`<span></span>`}
          <span>${num(offset + 1)}–${num(offset + ws.length)} of ${num(page.total)}</span>
          ${ws.length === LIMIT && offset + LIMIT < page.total ? html`<a href=${url(offset + LIMIT)}>Older ›</a>` : html`<span></span>`}
        </nav>
        ${offset + ws.length < page.total && ws.length < LIMIT ? html`<p class="note">The store keeps the most recent refusals only; older ones are counted, not listed.</p>` : null}`
        : html`<p class="empty">${offset ? 'No more refused merges.' : 'No merge was refused.'}</p>`) : err ? null : html`<p class="loading">Loading…</p>`}
    </section>
  </main>`;
}
