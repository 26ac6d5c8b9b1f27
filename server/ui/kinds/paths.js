// Paths (docs/analytics.md §15): the sequences of events (or of a property's values)
// users follow within sessions, from a start, to an end or both, drawn as
// a Sankey flow (chartjs-chart-sankey, vendored) and listed edge by edge.
// Every edge opens its users (list {source, target}).

import { html, useMemo } from '../lib/html.js';
import { eventNames, props, useApp } from '../lib/appctx.js';
import { set, setAt } from '../lib/query.js';
import { num, duration, COLORS } from '../lib/format.js';
import { Field, Select, EventSelect, MatcherEditor } from '../components/pickers.js';
import { ChartView, Clickable } from '../components/result.js';
import '../lib/sankey.js';

const GAP_UNITS = [['s', 'seconds'], ['m', 'minutes'], ['h', 'hours'], ['d', 'days']];

function parseGap(g) {
  const m = /^(\d+)(s|m|h|d|w|mo|y)$/.exec(g || '30m');
  return m ? [m[1], m[2]] : ['30', 'm'];
}

// OptionalMatcher edits q[field], a matcher that may be absent.
function OptionalMatcher({ q, field, title, label, onChange }) {
  const { schema } = useApp();
  return html`<${Field} title=${title} hint="optional">
    ${q[field] ? html`<div class="item"><div class="grow"><${MatcherEditor} m=${q[field]} label=${label} onChange=${(m) => onChange(set(q, field, m))} /></div>
      <button type="button" class="icon" aria-label=${`Remove ${label.toLowerCase()}`} onClick=${() => onChange(set(q, field, undefined))}>×</button></div>`
    : html`<button type="button" class="link" onClick=${() => onChange(set(q, field, { event: eventNames(schema)[0] || '$any' }))}>+ ${title}</button>`}
  <//>`;
}

function Builder({ q, onChange }) {
  const { schema } = useApp();
  const events = q.events === undefined || q.events === '$any' || (Array.isArray(q.events) && q.events[0] === '$any' && q.events.length === 1) ? null
    : typeof q.events === 'string' ? [q.events] : q.events;
  const [gn, gu] = parseGap(q.session_gap);
  const setGap = (n, u) => onChange(set(q, 'session_gap', `${Math.max(1, Number(n) || 1)}${u}`));
  const strings = props(schema, 'event').filter((p) => p.type === 'string');
  const num0 = (f) => (e) => onChange(set(q, f, Number(e.target.value) || undefined));
  return html`
    <${Field} title="Events" hint="the events that make up paths">
      <${Select} label="Path events" options=${[['any', 'every event'], ['some', 'only these events']]} value=${events ? 'some' : 'any'}
        onChange=${(v) => onChange(set(q, 'events', v === 'any' ? undefined : [eventNames(schema)[0]]))} />
      ${events ? html`<div class="chips-edit">${events.map((e, i) => html`<div class="item">
          <${EventSelect} label=${`Path event ${i + 1}`} any=${false} value=${e} onChange=${(v) => onChange(set(q, 'events', setAt(events, i, v)))} />
          ${events.length > 1 ? html`<button type="button" class="icon" aria-label=${`Remove path event ${i + 1}`}
            onClick=${() => onChange(set(q, 'events', setAt(events, i, undefined)))}>×</button>` : null}</div>`)}
        <button type="button" class="link" onClick=${() => onChange(set(q, 'events', [...events, eventNames(schema).find((n) => !events.includes(n)) || eventNames(schema)[0]]))}>+ event</button></div>` : null}
      <label>Items are
        <${Select} label="Path items" value=${q.item_property || ''}
          options=${[['', 'event names'], ...strings.map((p) => [p.name, `values of ${p.name} (else the event name)`])]}
          onChange=${(v) => onChange(set(q, 'item_property', v || undefined))} /></label>
      <label>Leave out items <input aria-label="Excluded items" placeholder="item, item…" value=${(q.exclude || []).join(', ')}
        onChange=${(e) => { const l = e.target.value.split(',').map((x) => x.trim()).filter(Boolean); onChange(set(q, 'exclude', l.length ? l : undefined)); }} /></label>
    <//>
    <${OptionalMatcher} q=${q} field="start" title="Start at" label="Path start" onChange=${onChange} />
    <${OptionalMatcher} q=${q} field="end" title="End at" label="Path end" onChange=${onChange} />
    <${Field} title="Paths">
      <div class="row">
        <label class="narrow">Steps <input type="number" id="path-steps" min="2" max="20" placeholder="5" value=${q.steps || ''} onInput=${num0('steps')} /></label>
        <label class="narrow">Min sessions <input type="number" id="min-sessions" min="1" placeholder="1" value=${q.min_sessions || ''} onInput=${num0('min_sessions')} /></label>
        <label class="narrow">Max edges <input type="number" id="max-edges" min="1" placeholder="50" value=${q.max_edges || ''} onInput=${num0('max_edges')} /></label>
      </div>
      <div class="row"><span>New session after</span>
        <input type="number" id="gap-n" min="1" aria-label="Session gap length" value=${gn} onInput=${(e) => setGap(e.target.value, gu)} />
        <${Select} label="Session gap unit" value=${gu} options=${GAP_UNITS} onChange=${(u) => setGap(gn, u)} />
      </div>
    <//>`;
}

// node splits a path node "3_checkout" into its position and item.
export function node(key) {
  const i = key.indexOf('_');
  return { pos: Number(key.slice(0, i)), item: key.slice(i + 1) };
}

// itemColor gives an item the same color in every column.
function itemColor(item, palette) {
  if (item === '...') return '#9ca3af';
  if (!palette.has(item)) palette.set(item, COLORS[palette.size % COLORS.length]);
  return palette.get(item);
}

function Result({ res, drill, chartRef, compact }) {
  const edges = res.edges || [];
  const nodes = [...new Set(edges.flatMap((e) => [e.source, e.target]))];
  const perColumn = {};
  for (const k of nodes) perColumn[node(k).pos] = (perColumn[node(k).pos] || 0) + 1;
  const tallest = Math.max(1, ...Object.values(perColumn));
  const config = useMemo(() => {
    const palette = new Map();
    // Colors in the order of the heaviest edges, so the main flow gets the first ones.
    for (const e of edges) { itemColor(node(e.source).item, palette); itemColor(node(e.target).item, palette); }
    const flowIn = {};
    for (const e of edges) flowIn[e.target] = (flowIn[e.target] || 0) + e.sessions;
    const flowOut = {};
    for (const e of edges) flowOut[e.source] = (flowOut[e.source] || 0) + e.sessions;
    return {
      type: 'sankey',
      data: {
        datasets: [{
          label: 'Paths',
          data: edges.map((e) => ({ from: e.source, to: e.target, flow: e.sessions })),
          colorFrom: (c) => itemColor(node(c.dataset.data[c.dataIndex].from).item, palette),
          colorTo: (c) => itemColor(node(c.dataset.data[c.dataIndex].to).item, palette),
          colorMode: 'gradient', alpha: 0.45, borderWidth: 0, nodeWidth: 12, nodePadding: 14, size: 'max',
          column: Object.fromEntries(nodes.map((k) => [k, node(k).pos - 1])),
          labels: Object.fromEntries(nodes.map((k) => [k, `${node(k).item} (${num(Math.max(flowIn[k] || 0, flowOut[k] || 0))})`])),
          font: { size: 11 },
          nodeLabels: { backgroundColor: 'rgba(255, 255, 255, 0.8)', borderRadius: 3, padding: 2 },
        }],
      },
      options: {
        layout: { padding: { left: 8, right: 8, top: 8, bottom: 8 } },
        plugins: {
          legend: { display: false },
          tooltip: { callbacks: { label: (ctx) => {
            const e = edges[ctx.dataIndex];
            return `${node(e.source).item} → ${node(e.target).item}: ${num(e.sessions)} sessions, ${num(e.users)} users, ${duration(e.avg_seconds)} apart`;
          } } },
        },
      },
    };
  }, [res]);
  const pick = (_, i) => drill({ source: edges[i].source, target: edges[i].target }, `edge ${edges[i].source} → ${edges[i].target}`);
  return html`
    ${edges.length ? html`<${ChartView} config=${config} chartRef=${chartRef} label="Paths flow"
      height=${compact ? 260 : Math.min(900, Math.max(300, 46 * tallest))} onPick=${drill ? pick : null} />`
      : html`<p class="empty">No path in this range.</p>`}
    ${compact ? null : html`<div class="scroll"><table class="grid" data-kind="paths">
      <thead><tr><th>From</th><th>To</th><th class="num">Sessions</th><th class="num">Users</th><th class="num">Avg time</th></tr></thead>
      <tbody>${edges.map((e, i) => html`<tr data-edge=${i}>
        <td><span class="pos">${node(e.source).pos}</span>${node(e.source).item}</td><td><span class="pos">${node(e.target).pos}</span>${node(e.target).item}</td>
        <td class="num" data-col="sessions">${num(e.sessions)}</td>
        <td class="num" data-col="users">${drill ? html`<${Clickable} onClick=${() => pick(0, i)}>${num(e.users)}<//>` : num(e.users)}</td>
        <td class="num" data-col="avg_seconds">${duration(e.avg_seconds)}</td></tr>`)}</tbody></table></div>
      <p class="note">Each edge counts the sessions that take it (a band's width) and their distinct users; a node is its position in the path and its item,
        with the sessions through it. "..." stands for the middle of a path longer than the steps. Click a band or a user count for its users.</p>`}`;
}

export default {
  kind: 'paths', label: 'Paths',
  fields: ['events', 'item_property', 'exclude', 'session_gap', 'start', 'end', 'steps', 'min_sessions', 'max_edges'],
  common: { where: true, breakdown: false, cohort: true },
  defaults: () => ({ steps: 5, max_edges: 30 }),
  Builder, Result,
};
