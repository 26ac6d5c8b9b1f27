// Spur web UI: builds spec §9 queries with pickers fed by the schema
// endpoint, runs them against the HTTP API and renders the result. The
// query (the §9 JSON) lives in the URL hash, so a view can be shared.

import { h, clear } from './dom.js';
import { renderResult, renderError, renderLoading, resetResult } from './render.js';

const OPS = [
  ['eq', '='], ['neq', '≠'], ['in', 'in'], ['not_in', 'not in'], ['gt', '>'], ['gte', '≥'],
  ['lt', '<'], ['lte', '≤'], ['contains', 'contains'], ['not_contains', 'does not contain'],
  ['is_set', 'is set'], ['is_not_set', 'is not set'],
];
const MATHS = [['count', 'Total count'], ['users', 'Unique users']];
const INTERVALS = ['hour', 'day', 'week', 'month'];
const DEFAULT_PERIODS = { hour: 24, day: 7, week: 4, month: 3 };
const ANY = '$any';

const $ = (id) => document.getElementById(id);

// state.q is the current query, exactly the §9 JSON sent to the API.
// drafts keeps the kind-specific part of each kind while switching tabs.
const state = { apps: [], schema: null, q: null, drafts: {}, running: null };

async function getJSON(url, opts) {
  const resp = await fetch(url, opts);
  let body;
  try {
    body = await resp.json();
  } catch {
    throw { code: 'internal', message: `HTTP ${resp.status}: the answer is not JSON` };
  }
  if (!resp.ok) throw body.error || { code: 'internal', message: `HTTP ${resp.status}` };
  return body;
}

function utcDate(us) {
  return new Date(us / 1000).toISOString().slice(0, 10);
}

function addDays(date, n) {
  const d = new Date(date + 'T00:00:00Z');
  d.setUTCDate(d.getUTCDate() + n);
  return d.toISOString().slice(0, 10);
}

function eventNames() {
  return (state.schema?.event_names || []).map((e) => e.name);
}

function topEvent(i) {
  const names = eventNames();
  return names[Math.min(i, names.length - 1)] || ANY;
}

function kindDefaults(kind) {
  switch (kind) {
    case 'trend':
      return { interval: 'day', series: [{ event: topEvent(0), math: 'count' }] };
    case 'funnel':
      return { steps: [{ event: topEvent(0) }, { event: topEvent(1) }], window: '14d' };
    case 'retention':
      return { start: { event: topEvent(0) }, return: { event: ANY }, period: 'week', periods: 8,
        type: 'first_time', windows: 'calendar', criterion: 'on' };
  }
  throw new Error('unknown kind ' + kind);
}

const KIND_FIELDS = {
  trend: ['interval', 'week_start', 'series'],
  funnel: ['steps', 'window'],
  retention: ['start', 'return', 'period', 'periods', 'type', 'windows', 'criterion'],
};

function defaultRange() {
  const s = state.schema;
  if (!s || !s.events) return undefined;
  return { from: utcDate(s.min_time), to: addDays(utcDate(s.max_time), 1) };
}

function newQuery(kind) {
  return { kind, app: state.app, range: defaultRange(), tz: state.schema?.tz || 'UTC', ...kindDefaults(kind) };
}

// ---- URL state ----

function queryFromHash() {
  const m = location.hash.match(/^#q=(.*)$/);
  if (!m) return null;
  try {
    const q = JSON.parse(decodeURIComponent(m[1]));
    return q && typeof q === 'object' && KIND_FIELDS[q.kind] ? q : null;
  } catch {
    return null;
  }
}

function hashOf(q) {
  return '#q=' + encodeURIComponent(JSON.stringify(q));
}

// ---- schema-driven pickers ----

function eventSelect(value, onChange, label) {
  const sel = h('select', { 'aria-label': label, onchange: (e) => onChange(e.target.value) },
    h('option', { value: ANY }, 'Any event'),
    ...(state.schema?.event_names || []).map((e) =>
      h('option', { value: e.name }, `${e.name} (${fmt(e.count)})`)));
  if (value && value !== ANY && !eventNames().includes(value)) {
    sel.append(h('option', { value }, `${value} (not in this app)`));
  }
  sel.value = value || ANY;
  return sel;
}

function props(source) {
  return (source === 'user' ? state.schema?.user_props : state.schema?.event_props) || [];
}

// propOptions returns the option groups of a property picker; values are
// "source:name".
function propOptions() {
  const group = (label, source) => h('optgroup', { label },
    ...props(source).map((p) => h('option', { value: `${source}:${p.name}` }, `${p.name} (${p.type})`)));
  return [group('Event properties', 'event'), group('User properties', 'user')];
}

function propType(source, name) {
  return props(source || 'event').find((p) => p.name === name)?.type;
}

const fmtNum = new Intl.NumberFormat('en-US');
function fmt(n) {
  return fmtNum.format(n);
}

// ---- builder ----

function renderKindTabs() {
  for (const b of document.querySelectorAll('#kinds button')) {
    const on = b.dataset.kind === state.q.kind;
    b.setAttribute('aria-selected', on);
    b.classList.toggle('active', on);
  }
}

function listEditor(items, render, add, min, addLabel) {
  const box = h('div', { class: 'list' });
  items.forEach((it, i) => {
    const rm = items.length > min
      ? h('button', { type: 'button', class: 'icon', title: 'Remove', 'aria-label': 'Remove',
        onclick: () => { items.splice(i, 1); renderBuilder(); } }, '×')
      : null;
    box.append(h('div', { class: 'item' }, render(it, i), rm));
  });
  box.append(h('button', { type: 'button', class: 'link', onclick: () => { items.push(add()); renderBuilder(); } }, addLabel));
  return box;
}

function select(options, value, onChange, label) {
  const sel = h('select', { 'aria-label': label, onchange: (e) => onChange(e.target.value) },
    ...options.map(([v, t]) => h('option', { value: v }, t)));
  sel.value = value;
  return sel;
}

function renderTrendFields(q) {
  return [
    h('fieldset', {}, h('legend', {}, 'Series'),
      listEditor(q.series, (s, i) => h('div', { class: 'row' },
        h('span', { class: 'badge' }, String.fromCharCode(65 + i)),
        eventSelect(s.event, (v) => { s.event = v; }, `Series ${i + 1} event`),
        select(MATHS, s.math || 'count', (v) => { s.math = v; }, `Series ${i + 1} math`)),
      () => ({ event: topEvent(0), math: 'users' }), 1, '+ Series')),
    h('fieldset', {}, h('legend', {}, 'Interval'),
      select(INTERVALS.map((v) => [v, v]), q.interval || 'day', (v) => { q.interval = v; }, 'Interval')),
  ];
}

function parseWindow(w) {
  const m = /^(\d+)([smhdw])$/.exec(w || '14d');
  return m ? [m[1], m[2]] : ['14', 'd'];
}

function renderFunnelFields(q) {
  const [n, unit] = parseWindow(q.window);
  const setWindow = () => { q.window = `${Math.max(1, Number(count.value) || 1)}${unitSel.value}`; };
  const count = h('input', { type: 'number', id: 'window-n', min: 1, value: n, 'aria-label': 'Window length', oninput: setWindow });
  const unitSel = select([['m', 'minutes'], ['h', 'hours'], ['d', 'days'], ['w', 'weeks']], unit, setWindow, 'Window unit');
  return [
    h('fieldset', {}, h('legend', {}, 'Steps'),
      listEditor(q.steps, (s, i) => h('div', { class: 'row' },
        h('span', { class: 'badge' }, String(i + 1)),
        eventSelect(s.event, (v) => { s.event = v; }, `Step ${i + 1} event`)),
      () => ({ event: topEvent(q.steps.length) }), 2, '+ Step')),
    h('fieldset', {}, h('legend', {}, 'Conversion window'),
      h('div', { class: 'row' }, count, unitSel)),
  ];
}

function renderRetentionFields(q) {
  const periodsInput = h('input', { type: 'number', min: 1, max: 100, value: q.periods || DEFAULT_PERIODS[q.period || 'day'],
    'aria-label': 'Periods', id: 'periods', oninput: (e) => { q.periods = Number(e.target.value) || undefined; } });
  return [
    h('fieldset', {}, h('legend', {}, 'Cohort: users who did'),
      eventSelect(q.start?.event, (v) => { q.start = { ...q.start, event: v }; }, 'Start event')),
    h('fieldset', {}, h('legend', {}, 'Came back and did'),
      eventSelect(q.return?.event || ANY, (v) => { q.return = { ...q.return, event: v }; }, 'Return event')),
    h('fieldset', {}, h('legend', {}, 'Periods'),
      h('div', { class: 'row' },
        select(INTERVALS.map((v) => [v, v]), q.period || 'day', (v) => {
          q.period = v; q.periods = DEFAULT_PERIODS[v]; periodsInput.value = q.periods;
        }, 'Period'),
        periodsInput),
      h('div', { class: 'row' },
        select([['first_time', 'first time'], ['recurring', 'recurring']], q.type || 'first_time', (v) => { q.type = v; }, 'Cohort type'),
        select([['calendar', 'calendar'], ['rolling', 'rolling']], q.windows || 'calendar', (v) => { q.windows = v; }, 'Windows'),
        select([['on', 'on'], ['on_or_after', 'on or after']], q.criterion || 'on', (v) => { q.criterion = v; }, 'Criterion'))),
  ];
}

function renderFilters() {
  const q = state.q;
  const box = clear($('filters'));
  (q.where || []).forEach((f, i) => {
    const propSel = h('select', { 'aria-label': `Filter ${i + 1} property`, onchange: (e) => {
      const [source, name] = e.target.value.split(/:(.*)/s);
      f.property = name;
      if (source === 'user') f.source = 'user'; else delete f.source;
      renderFilters();
    } }, ...propOptions());
    propSel.value = `${f.source || 'event'}:${f.property}`;
    const opSel = select(OPS, f.op || 'eq', (v) => { f.op = v; renderFilters(); }, `Filter ${i + 1} operator`);
    const noValue = f.op === 'is_set' || f.op === 'is_not_set';
    const p = props(f.source).find((x) => x.name === f.property);
    const listId = `filter-values-${i}`;
    const valueInput = noValue ? null : h('input', {
      'aria-label': `Filter ${i + 1} value`, list: listId, value: valueText(f.value),
      placeholder: f.op === 'in' || f.op === 'not_in' ? 'a, b, c' : 'value',
      oninput: (e) => { f.value = coerceValue(e.target.value, f); },
    });
    if (noValue) delete f.value;
    box.append(h('div', { class: 'item filter' }, propSel, opSel, valueInput,
      h('datalist', { id: listId }, ...(p?.top || []).map((t) => h('option', { value: t.name }))),
      h('button', { type: 'button', class: 'icon', title: 'Remove filter', 'aria-label': 'Remove filter',
        onclick: () => { q.where.splice(i, 1); if (!q.where.length) delete q.where; renderFilters(); } }, '×')));
  });
}

function valueText(v) {
  if (v === undefined || v === null) return '';
  return Array.isArray(v) ? v.join(', ') : String(v);
}

// coerceValue turns the typed text into the JSON value the property's type
// wants (numbers, booleans, lists for in/not_in); the server validates.
function coerceValue(text, f) {
  const t = propType(f.source, f.property);
  const one = (s) => {
    s = s.trim();
    if ((t === 'int' || t === 'float') && s !== '' && !Number.isNaN(Number(s))) return Number(s);
    if (t === 'bool' && (s === 'true' || s === 'false')) return s === 'true';
    return s;
  };
  if (f.op === 'in' || f.op === 'not_in') return text.split(',').filter((s) => s.trim() !== '').map(one);
  return one(text);
}

function renderBreakdown() {
  const q = state.q;
  const sel = clear($('breakdown'));
  sel.append(h('option', { value: '' }, 'None'), ...propOptions());
  sel.value = q.breakdown ? `${q.breakdown.source || 'event'}:${q.breakdown.property}` : '';
  $('breakdown-limit').value = q.breakdown?.limit || '';
  $('breakdown-limit').disabled = !q.breakdown;
}

function renderBuilder() {
  const q = state.q;
  renderKindTabs();
  const fields = { trend: renderTrendFields, funnel: renderFunnelFields, retention: renderRetentionFields }[q.kind](q);
  clear($('kind-fields')).append(...fields);
  $('from').value = q.range?.from?.slice(0, 10) || '';
  $('to').value = q.range?.to?.slice(0, 10) || '';
  $('tz').value = q.tz || '';
  renderFilters();
  renderBreakdown();
}

function switchKind(kind) {
  if (kind === state.q.kind) return;
  const old = state.q;
  state.drafts[old.kind] = Object.fromEntries(KIND_FIELDS[old.kind].filter((k) => k in old).map((k) => [k, old[k]]));
  const q = { kind, app: old.app, range: old.range, tz: old.tz, where: old.where, breakdown: old.breakdown };
  Object.assign(q, state.drafts[kind] || kindDefaults(kind));
  for (const k of Object.keys(q)) if (q[k] === undefined) delete q[k];
  state.q = q;
  renderBuilder();
  resetResult();
}

// ---- running ----

// readCommonFields copies the range and zone inputs into the query; it runs
// on every edit, so re-rendering the builder never loses what was typed.
function readCommonFields() {
  const q = state.q;
  const from = $('from').value, to = $('to').value;
  if (from && to) q.range = { from, to }; else delete q.range;
  const tz = $('tz').value.trim();
  if (tz) q.tz = tz; else delete q.tz;
}

async function run({ push = true } = {}) {
  const q = state.q;
  q.app = state.app;
  if (q.kind === 'retention' && !q.periods) q.periods = DEFAULT_PERIODS[q.period || 'day'];
  const hash = hashOf(q);
  if (location.hash !== hash) history[push ? 'pushState' : 'replaceState'](null, '', hash);
  state.running?.abort();
  const ctl = new AbortController();
  state.running = ctl;
  $('run').disabled = true;
  renderLoading(q);
  try {
    const res = await getJSON(`api/apps/${encodeURIComponent(q.app)}/query?trace=1`, {
      method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(q), signal: ctl.signal,
    });
    if (state.running !== ctl) return;
    renderResult(q, res);
  } catch (err) {
    if (ctl.signal.aborted) return;
    renderError(err instanceof Error ? { code: 'network', message: err.message } : err);
  } finally {
    if (state.running === ctl) {
      state.running = null;
      $('run').disabled = false;
    }
  }
}

async function loadApp(name) {
  state.app = name;
  $('app').value = name;
  state.schema = null;
  try {
    state.schema = await getJSON(`api/apps/${encodeURIComponent(name)}/schema`);
  } catch (err) {
    renderError(err);
  }
}

async function selectApp(name) {
  await loadApp(name);
  state.drafts = {};
  state.q = newQuery(state.q?.kind || 'trend');
  renderBuilder();
  run();
}

async function loadFromURL() {
  const q = queryFromHash();
  if (!q) return false;
  if (q.app && q.app !== state.app && state.apps.some((a) => a.name === q.app)) await loadApp(q.app);
  q.app = state.app;
  state.q = q;
  renderBuilder();
  run({ push: false });
  return true;
}

async function init() {
  const tzs = typeof Intl.supportedValuesOf === 'function' ? Intl.supportedValuesOf('timeZone') : ['UTC'];
  $('tz-list').append(...['UTC', ...tzs].map((z) => h('option', { value: z })));
  for (const b of document.querySelectorAll('#kinds button')) b.onclick = () => switchKind(b.dataset.kind);
  $('app').onchange = (e) => selectApp(e.target.value);
  $('builder').onsubmit = (e) => { e.preventDefault(); run(); };
  for (const id of ['from', 'to', 'tz']) $(id).addEventListener('input', readCommonFields);
  $('add-filter').onclick = () => {
    const first = props('event')[0] || props('user')[0];
    if (!first) return;
    const src = props('event').length ? 'event' : 'user';
    (state.q.where ||= []).push({ property: first.name, op: 'eq', value: '', ...(src === 'user' ? { source: 'user' } : {}) });
    renderFilters();
  };
  $('breakdown').onchange = (e) => {
    const v = e.target.value;
    if (!v) { delete state.q.breakdown; } else {
      const [source, property] = v.split(/:(.*)/s);
      state.q.breakdown = { property, source, limit: Number($('breakdown-limit').value) || 10 };
    }
    renderBreakdown();
  };
  $('breakdown-limit').oninput = (e) => { if (state.q.breakdown) state.q.breakdown.limit = Number(e.target.value) || undefined; };
  $('share').onclick = async () => {
    history.replaceState(null, '', hashOf(state.q));
    try {
      await navigator.clipboard.writeText(location.href);
      $('share').textContent = 'Link copied';
    } catch {
      $('share').textContent = 'Link in address bar';
    }
    setTimeout(() => { $('share').textContent = 'Copy link'; }, 1500);
  };
  window.addEventListener('popstate', () => { loadFromURL(); });

  try {
    state.apps = (await getJSON('api/apps')).apps;
  } catch (err) {
    renderError(err);
    return;
  }
  const sel = $('app');
  sel.append(...state.apps.map((a) => h('option', { value: a.name }, `${a.name} (${fmt(a.events)} events)`)));
  if (!state.apps.length) {
    renderError({ code: 'not_found', message: 'The store has no apps yet: import events with `spur import` or POST /api/apps/{app}/import.' });
    return;
  }
  const wanted = queryFromHash()?.app;
  await loadApp(state.apps.some((a) => a.name === wanted) ? wanted : state.apps[0].name);
  if (!(await loadFromURL())) {
    state.q = newQuery('trend');
    renderBuilder();
    run({ push: false });
  }
}

init();
