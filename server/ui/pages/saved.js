// Saved insights, dashboards and cohorts of the app: lists, a dashboard's
// tiles (each re-running its insight, served from the cache while the
// data has not changed, with the answer's age), and saved cohorts with
// their current number of users.

import { html, useEffect, useState } from '../lib/html.js';
import { useApp } from '../lib/appctx.js';
import { api } from '../lib/api.js';
import { queryURL } from '../lib/query.js';
import { num, age } from '../lib/format.js';
import { kindOf } from '../kinds/index.js';
import { ErrorBox, Warnings } from '../components/result.js';
import { refreshSaved } from '../components/cohort.js';

// useList loads a collection; reload() fetches it again.
function useList(app, coll) {
  const [state, setState] = useState({ items: null, err: null });
  const [n, setN] = useState(0);
  useEffect(() => {
    let live = true;
    api.list(app, coll).then((items) => live && setState({ items }), (err) => live && setState({ err }));
    return () => { live = false; };
  }, [app, coll, n]);
  return [state, () => setN(n + 1)];
}

const base = (app) => `/apps/${encodeURIComponent(app)}`;

export function InsightsPage() {
  const { app } = useApp();
  const [{ items, err }, reload] = useList(app, 'insights');
  return html`<main class="page"><h1>Saved insights</h1>
    <p class="hint">Save an insight from the query page (Save insight). A relative range such as "last 30 days" stays relative.</p>
    ${err ? html`<${ErrorBox} err=${err} />` : null}
    ${items && !items.length ? html`<p class="empty">No saved insight yet.</p>` : null}
    ${items?.length ? html`<table class="grid" data-testid="insights"><thead><tr><th>Name</th><th>Kind</th><th>Range</th><th>Updated</th><th>Version</th><th></th></tr></thead>
      <tbody>${items.map((d) => html`<tr data-id=${d.id}>
        <td><a href=${queryURL(app, d.query) + '&insight=' + d.id}>${d.name}</a></td><td>${d.query.kind}</td>
        <td>${d.query.range?.last ? `last ${d.query.range.last}` : d.query.range ? `${d.query.range.from} – ${d.query.range.to}` : 'all data'}</td>
        <td>${d.updated.slice(0, 16).replace('T', ' ')}</td><td class="num">${d.version}</td>
        <td><button type="button" class="link danger" onClick=${async () => { await api.remove(app, 'insights', d.id, d.version); reload(); }}>Delete</button></td>
      </tr>`)}</tbody></table>` : null}
  </main>`;
}

export function DashboardsPage() {
  const { app } = useApp();
  const [{ items, err }, reload] = useList(app, 'dashboards');
  const [name, setName] = useState('');
  const [cerr, setCerr] = useState(null);
  return html`<main class="page"><h1>Dashboards</h1>
    ${err ? html`<${ErrorBox} err=${err} />` : null}
    <form class="row inline-form" onSubmit=${async (e) => {
      e.preventDefault();
      try { const d = await api.create(app, 'dashboards', { name, tiles: [] }); setName(''); location.assign(`${base(app)}/dashboards/${d.id}`); } catch (er) { setCerr(er); }
    }}><input aria-label="Dashboard name" placeholder="New dashboard name" value=${name} onInput=${(e) => setName(e.target.value)} />
      <button type="submit" class="primary" disabled=${!name}>Create dashboard</button></form>
    ${cerr ? html`<${ErrorBox} err=${cerr} />` : null}
    ${items && !items.length ? html`<p class="empty">No dashboard yet.</p>` : null}
    <ul class="cards">${(items || []).map((d) => html`<li data-id=${d.id}><a href=${`${base(app)}/dashboards/${d.id}`}>${d.name}</a>
      <span class="muted">${d.tiles.length} tile${d.tiles.length === 1 ? '' : 's'}</span>
      <button type="button" class="link danger" onClick=${async () => { await api.remove(app, 'dashboards', d.id, d.version); reload(); }}>Delete</button></li>`)}</ul>
  </main>`;
}

// Tile runs one saved insight through the cached result endpoint.
function Tile({ app, tile, insight, onRemove }) {
  const [st, setSt] = useState({});
  const [n, setN] = useState(0);
  useEffect(() => {
    if (!insight) return undefined;
    const c = new AbortController();
    setSt((s) => ({ ...s, busy: true }));
    api.insightResult(app, insight.id, { refresh: n > 0, signal: c.signal }).then((r) => setSt({ r }), (err) => err.name !== 'AbortError' && setSt({ err }));
    return () => c.abort();
  }, [app, insight?.id, insight?.version, n]);
  const K = st.r && kindOf(st.r.result.kind);
  return html`<article class=${`tile w${tile.width || 1}`} data-insight=${tile.insight} aria-busy=${st.busy ? 'true' : null}>
    <header><h3>${insight ? html`<a href=${queryURL(app, insight.query) + '&insight=' + insight.id}>${insight.name}</a>` : `insight ${tile.insight} (deleted)`}</h3>
      <button type="button" class="icon" aria-label="Remove tile" onClick=${onRemove}>×</button></header>
    ${st.busy ? html`<div class="loading"><span class="spinner"></span>Running…</div>` : null}
    ${st.err ? html`<${ErrorBox} err=${st.err} />` : null}
    ${st.r ? html`<${Warnings} warnings=${st.r.result.warnings} />
      ${K ? html`<${K.Result} q=${insight.query} res=${st.r.result} compact />` : null}
      <footer class="age" data-testid="tile-age">${st.r.cached ? 'cached' : 'computed'} ${age(st.r.age_seconds)} ago · data version ${st.r.catalog_version}
        <button type="button" class="link" onClick=${() => setN(n + 1)}>Refresh</button></footer>` : null}
  </article>`;
}

export function DashboardPage({ params }) {
  const { app } = useApp();
  const [dash, setDash] = useState(null);
  const [err, setErr] = useState(null);
  const [{ items: insights }] = useList(app, 'insights');
  const [pick, setPick] = useState('');
  useEffect(() => { api.get(app, 'dashboards', params.id).then(setDash, setErr); }, [app, params.id]);
  const save = async (tiles) => {
    try { setDash(await api.update(app, 'dashboards', dash.id, dash.version, { name: dash.name, description: dash.description, tiles })); } catch (e) { setErr(e); }
  };
  if (err) return html`<main class="page"><${ErrorBox} err=${err} /></main>`;
  if (!dash) return html`<main class="page"><p class="loading">Loading…</p></main>`;
  const byId = Object.fromEntries((insights || []).map((i) => [i.id, i]));
  return html`<main class="page dashboard"><h1>${dash.name} <span class="muted">version ${dash.version}</span></h1>
    <form class="row inline-form" onSubmit=${(e) => { e.preventDefault(); if (pick) save([...dash.tiles, { insight: pick }]); }}>
      <select aria-label="Insight to add" value=${pick} onChange=${(e) => setPick(e.target.value)}>
        <option value="">Add a saved insight…</option>${(insights || []).map((i) => html`<option value=${i.id}>${i.name}</option>`)}</select>
      <button type="submit" class="secondary" disabled=${!pick}>Add tile</button></form>
    ${dash.tiles.length ? null : html`<p class="empty">No tile yet: add a saved insight.</p>`}
    <div class="tiles">${insights ? dash.tiles.map((t, i) => html`<${Tile} key=${`${i}-${t.insight}`} app=${app} tile=${t} insight=${byId[t.insight]}
      onRemove=${() => save(dash.tiles.filter((_, j) => j !== i))} />`) : null}</div>
  </main>`;
}

export function CohortsPage() {
  const { app } = useApp();
  const [{ items, err }, reload] = useList(app, 'cohorts');
  const [sizes, setSizes] = useState({});
  useEffect(() => {
    for (const c of items || []) {
      api.query(app, { kind: 'cohort', cohort: c.name, list: { limit: 1 } }).then((r) => setSizes((s) => ({ ...s, [c.name]: r.users })),
        (e) => setSizes((s) => ({ ...s, [c.name]: e.message })));
    }
  }, [items]);
  const open = (def) => queryURL(app, { kind: 'cohort', cohort: def, list: { limit: 50, offset: 0 } });
  return html`<main class="page"><h1>Saved cohorts</h1>
    <p class="hint">A saved cohort is a condition tree evaluated whenever a query uses it (never stale). Build one on the <a href=${open({ performed: { event: '$any' } })}>cohort page</a>.</p>
    ${err ? html`<${ErrorBox} err=${err} />` : null}
    ${items && !items.length ? html`<p class="empty">No saved cohort yet.</p>` : null}
    ${items?.length ? html`<table class="grid" data-testid="cohorts"><thead><tr><th>Name</th><th class="num">Users now</th><th>Description</th><th>Saved</th><th></th></tr></thead>
      <tbody>${items.map((c) => html`<tr data-name=${c.name}>
        <td><a href=${open(c.name)}>${c.name}</a> <a class="muted" href=${open(c.definition)}>(edit a copy)</a></td>
        <td class="num">${typeof sizes[c.name] === 'number' ? num(sizes[c.name]) : sizes[c.name] || '…'}</td>
        <td>${c.description || ''}</td><td>${(c.updated || '').slice(0, 16).replace('T', ' ')}</td>
        <td><button type="button" class="link danger" onClick=${async () => { await api.remove(app, 'cohorts', c.name, c.version || undefined); refreshSaved(app); reload(); }}>Delete</button></td>
      </tr>`)}</tbody></table>` : null}
  </main>`;
}
