// The analysis page: the builder of the current kind on the left, the
// result on the right. The query lives in the URL (?q= the exact docs/analytics.md §9
// JSON; &insight=ID when it is a saved insight's), so every view is a
// link; running, drilling into a number and paging users are navigations.

import { html, useEffect, useRef, useState } from '../lib/html.js';
import { useLocation } from '../vendor/preact-iso-router.js';
import { useApp } from '../lib/appctx.js';
import { api, download } from '../lib/api.js';
import { set, parseQuery, queryURL, dataRange, coarsen, describeList, MAX_POINTS } from '../lib/query.js';
import { num } from '../lib/format.js';
import { KINDS, kindOf } from '../kinds/index.js';
import { RangeField, WhereField, BreakdownField, CohortField } from '../components/common.js';
import { Field } from '../components/pickers.js';
import { Warnings, ErrorBox, Stats, Trace, savePNG } from '../components/result.js';
import { UserList } from '../components/userlist.js';

// newQuery is a fresh query of kind over the app's whole data.
export function newQuery(app, schema, kind) {
  return { kind, app, range: dataRange(schema), ...(schema?.tz ? { tz: schema.tz } : {}), ...kindOf(kind).defaults(schema) };
}

const COMMON = ['kind', 'app', 'range', 'tz', 'now', 'limits'];

// withDistinctIDs is q as the page sends it: a list asks for each
// person's distinct ids (docs/identity.md §1), which changes the shape of its
// entries, not which users it lists, so the link keeps q as written.
const withDistinctIDs = (q) => (q.list && q.list.distinct_ids === undefined ? { ...q, list: { ...q.list, distinct_ids: true } } : q);

// switchKind moves the draft to another kind: the common fields it takes
// stay, its own fields come from the last draft of that kind or defaults.
function switchKind(q, kind, drafts, schema) {
  const from = kindOf(q.kind), to = kindOf(kind);
  if (from) drafts[q.kind] = Object.fromEntries(from.fields.filter((f) => f in q).map((f) => [f, q[f]]));
  const n = Object.fromEntries(COMMON.filter((f) => f in q).map((f) => [f, q[f]]));
  n.kind = kind;
  for (const f of ['where', 'breakdown', 'cohort']) if (to.common[f] && q[f] !== undefined) n[f] = q[f];
  Object.assign(n, to.from ? to.from(q) : {}, drafts[kind] || to.defaults(schema));
  return n;
}

export function QueryPage() {
  const { app, schema } = useApp();
  const loc = useLocation();
  const urlQ = parseQuery(loc.query.q);
  const insightId = loc.query.insight || '';
  const [draft, setDraftState] = useState(urlQ);
  // draftRef is the latest draft: an input's change event (on blur) may
  // come just before the Run click, before a re-render.
  const draftRef = useRef(urlQ);
  const setDraft = (q) => { draftRef.current = q; setDraftState(q); };
  const [run, setRun] = useState({}); // {q, res, err, busy, cancelled}
  const [notice, setNotice] = useState(null);
  const [keepFine, setKeepFine] = useState(false);
  const [listTitle, setListTitle] = useState('');
  const ctrl = useRef(null);
  const chartRef = useRef(null);
  const drafts = useRef({});

  const go = (q, replace) => loc.route(queryURL(app, q) + (insightId ? `&insight=${encodeURIComponent(insightId)}` : ''), replace);

  const execute = async (q) => {
    ctrl.current?.abort();
    const c = new AbortController();
    ctrl.current = c;
    setRun((r) => ({ ...r, busy: true, cancelled: false }));
    try {
      const res = await api.query(app, withDistinctIDs(q), { signal: c.signal, trace: loc.query.trace === '1' });
      if (ctrl.current === c) setRun({ q, res });
    } catch (err) {
      if (ctrl.current !== c) return;
      if (err.name === 'AbortError') setRun((r) => ({ ...r, busy: false, cancelled: true }));
      else setRun({ q, err });
    }
  };

  // Every change of the URL's query (a link, Run, a drill-down, Back)
  // shows it in the builder and runs it.
  useEffect(() => {
    let q = urlQ;
    if (!q || q.kind && !kindOf(q.kind)) {
      if (!q) return go(newQuery(app, schema, 'trend'), true);
    }
    if (q.app && q.app !== app) return loc.route(queryURL(q.app, q), true);
    const iv = kindOf(q.kind)?.interval?.(q);
    if (iv && !keepFine) {
      const c = coarsen(iv, q.range, schema);
      if (c.interval !== iv) {
        setNotice({ from: iv, to: c.interval, points: c.points });
        return go(set(q, 'interval', c.interval), true);
      }
    }
    setDraft(q);
    execute(q);
    return undefined;
  }, [loc.query.q]);
  useEffect(() => () => ctrl.current?.abort(), []);

  if (!draft) return html`<main><p class="loading">Loading…</p></main>`;
  const kind = kindOf(draft.kind);
  const submit = (e) => {
    e?.preventDefault();
    setNotice(null);
    const q = { ...draftRef.current, app };
    if (loc.query.q === JSON.stringify(q)) execute(q);
    else go(q);
  };
  const cancel = () => {
    ctrl.current?.abort();
    ctrl.current = null;
    setRun((r) => ({ ...r, busy: false, cancelled: true }));
  };
  // drill opens the users of one number: list's coordinates, in the shown
  // query changed by patch (fields set, or removed when undefined).
  const drill = (list, title, patch) => {
    setListTitle(title || '');
    const q = Object.entries(patch || {}).reduce((o, [k, v]) => set(o, k, v), run.q);
    go({ ...q, list: { ...list, limit: 50, offset: 0 } });
  };
  const page = (offset) => go({ ...run.q, list: { ...run.q.list, offset } });
  const closeList = () => go(set(run.q, 'list', undefined));
  const res = run.res, shownQ = run.q;
  const ShownKind = res && kindOf(res.kind) ? kindOf(res.kind) : null;
  return html`<main class="query-page">
    <nav class="kinds" role="tablist" aria-label="Analysis">
      ${KINDS.map((k) => html`<button type="button" role="tab" data-kind=${k.kind} aria-selected=${k.kind === draft.kind}
        class=${k.kind === draft.kind ? 'active' : ''} onClick=${() => { if (k.kind !== draft.kind) go(switchKind(draft, k.kind, drafts.current, schema)); }}>${k.label}</button>`)}
    </nav>
    <form id="builder" autocomplete="off" onSubmit=${submit}>
      ${kind ? html`<${kind.Builder} q=${draft} onChange=${setDraft} />` : html`<${ErrorBox} err=${{ code: 'invalid_query', field: 'kind', message: `this UI has no builder for kind "${draft.kind}": edit the JSON below` }} />`}
      <${RangeField} q=${draft} onChange=${setDraft} />
      ${kind?.common.where ? html`<${WhereField} q=${draft} onChange=${setDraft} />` : null}
      ${kind?.common.breakdown ? html`<${BreakdownField} q=${draft} onChange=${setDraft} opts=${kind.common.breakdown} />` : null}
      ${kind?.common.cohort ? html`<${CohortField} q=${draft} onChange=${setDraft} />` : null}
      ${draft.list && draft.kind !== 'cohort' ? html`<${Field} title="Users listed">
        <p class="listed" data-testid="builder-list">${describeList(draft.list)} · page of ${draft.list.limit || 100} from ${draft.list.offset || 0}
          <button type="button" class="icon" aria-label="Stop listing users" onClick=${() => setDraft(set(draft, 'list', undefined))}>×</button></p><//>` : null}
      <${JSONEditor} q=${draft} onChange=${setDraft} />
      <div class="run-bar">
        ${/* Keys: two elements, so a click on Cancel never lands on a submit button it turned into. */ ''}
        ${run.busy
          ? html`<button type="button" key="cancel" id="cancel" class="primary danger" onClick=${cancel}>Cancel</button>`
          : html`<button type="submit" key="run" id="run" class="primary">Run query</button>`}
      </div>
    </form>
    <section id="result" aria-live="polite" aria-busy=${run.busy ? 'true' : null} class=${run.busy ? 'busy' : ''}
      data-shown=${shownQ && !run.busy ? JSON.stringify(shownQ) : null}>
      <div class="toolbar">
        <${SaveInsight} app=${app} q=${shownQ} id=${insightId} onSaved=${(id) => loc.route(queryURL(app, shownQ) + `&insight=${encodeURIComponent(id)}`, true)} />
        <button type="button" class="ghost" disabled=${!res} onClick=${async () => download(await api.queryCSV(app, shownQ), `spur-${shownQ.kind}.csv`)}>CSV</button>
        <button type="button" class="ghost" disabled=${!res} onClick=${() => savePNG(chartRef.current, `spur-${shownQ.kind}.png`)}>PNG</button>
        <${CopyLink} />
      </div>
      ${notice ? html`<div class="notice" role="status" data-testid="coarsened">
        A ${notice.from} chart over this range would draw ${num(notice.points)} points, more than the ${num(MAX_POINTS)} it can show: the interval is now ${notice.to}.
        <button type="button" class="link" onClick=${() => { setKeepFine(true); setNotice(null); go(set(draft, 'interval', notice.from), true); }}>Keep ${notice.from}</button></div>` : null}
      ${run.busy ? html`<div class="loading" role="status"><span class="spinner"></span>Running ${draft.kind} query…</div>` : null}
      ${run.cancelled ? html`<div class="notice" role="status">Cancelled.</div>` : null}
      ${run.err ? html`<${ErrorBox} err=${run.err} />` : null}
      ${res ? html`<${Warnings} warnings=${res.warnings} />` : null}
      ${res && ShownKind ? html`<${ShownKind.Result} q=${shownQ} res=${res} drill=${drill} page=${page} chartRef=${chartRef}
        onQuery=${(q) => go(set(q, 'list', undefined))} />` : null}
      ${res && !ShownKind ? html`<pre class="json">${JSON.stringify(res, null, 2)}</pre>` : null}
      ${res?.list && res.kind !== 'cohort' ? html`<${UserList} app=${app} list=${res.list} title=${listTitle || describeList(shownQ.list)} busy=${run.busy}
        onPage=${page} onClose=${closeList} />` : null}
      ${res ? html`<${Stats} st=${res.stats} /><${Trace} trace=${res.trace} />` : null}
    </section>
  </main>`;
}

// JSONEditor shows the exact query JSON the builder runs, editable.
function JSONEditor({ q, onChange }) {
  const [text, setText] = useState(null);
  const [err, setErr] = useState(null);
  const shown = text ?? JSON.stringify(q, null, 2);
  return html`<details class="json-editor"><summary>Query JSON</summary>
    <textarea aria-label="Query JSON" spellcheck="false" rows="10" value=${shown} onInput=${(e) => setText(e.target.value)}></textarea>
    ${err ? html`<p class="error-text">${err}</p>` : null}
    <button type="button" class="secondary" disabled=${text === null} onClick=${() => {
      const n = parseQuery(text);
      if (!n) { setErr('Not a query: want a JSON object with a "kind".'); return; }
      setErr(null); setText(null); onChange(n);
    }}>Apply JSON</button></details>`;
}

function CopyLink() {
  const [label, setLabel] = useState('Copy link');
  return html`<button type="button" class="ghost" id="share" onClick=${async () => {
    try { await navigator.clipboard.writeText(location.href); setLabel('Link copied'); } catch { setLabel('Link in address bar'); }
    setTimeout(() => setLabel('Copy link'), 1500);
  }}>${label}</button>`;
}

// SaveInsight saves the shown query as a named insight (stored in the app
// as given, relative ranges kept), or updates the insight it came from.
function SaveInsight({ app, q, id, onSaved }) {
  const [open, setOpen] = useState(false);
  const [doc, setDoc] = useState(null);
  const [name, setName] = useState('');
  const [msg, setMsg] = useState(null);
  useEffect(() => {
    if (!id) { setDoc(null); return; }
    api.get(app, 'insights', id).then((d) => { setDoc(d); setName(d.name); }).catch(() => setDoc(null));
  }, [app, id]);
  if (!q) return null;
  const query = set(set(q, 'list', undefined), 'app', undefined);
  const save = async (asNew) => {
    setMsg(null);
    try {
      const body = { name, query, ...(doc?.description ? { description: doc.description } : {}) };
      const d = doc && !asNew ? await api.update(app, 'insights', doc.id, doc.version, body) : await api.create(app, 'insights', body);
      setDoc(d);
      setMsg({ ok: `Saved "${d.name}" (version ${d.version}).` });
      onSaved(d.id);
    } catch (err) {
      setMsg({ err });
    }
  };
  return html`<span class="save-insight">
    <button type="button" class="ghost" id="save-insight" onClick=${() => setOpen(!open)}>${doc ? `Insight: ${doc.name}` : 'Save insight'}</button>
    ${open ? html`<div class="popover" role="dialog" aria-label="Save insight">
      <input aria-label="Insight name" placeholder="Insight name" value=${name} onInput=${(e) => setName(e.target.value)} />
      ${doc ? html`<button type="button" class="primary" disabled=${!name} onClick=${() => save(false)}>Save (version ${doc.version + 1})</button>` : null}
      <button type="button" class=${doc ? 'secondary' : 'primary'} disabled=${!name} onClick=${() => save(true)}>${doc ? 'Save as new' : 'Save'}</button>
      ${msg?.ok ? html`<p class="ok" role="status">${msg.ok}</p>` : null}
      ${msg?.err ? html`<${ErrorBox} err=${msg.err} />` : null}
    </div>` : null}
  </span>`;
}
