// Lifecycle (docs/analytics.md §14): per bucket, the active users who are new,
// returning or resurrecting, and the dormant ones (drawn below zero), as
// stacked bars; one group at a time with a breakdown by a user property.
// Every count opens its users (list {bucket, status}).

import { html, useMemo, useState } from '../lib/html.js';
import { topEvent } from '../lib/appctx.js';
import { set } from '../lib/query.js';
import { num, bucketLabel, breakdownLabel } from '../lib/format.js';
import { Field, MatcherEditor } from '../components/pickers.js';
import { ChartView, Clickable } from '../components/result.js';
import { IntervalRow } from '../components/common.js';

export const STATUSES = [
  ['new', 'New', '#16a34a', 'first seen in the app in this bucket'],
  ['returning', 'Returning', '#2563eb', 'active in the bucket before too'],
  ['resurrecting', 'Resurrecting', '#ea580c', 'back after an inactive bucket'],
  ['dormant', 'Dormant', '#dc2626', 'active in the bucket before, not in this one'],
];

function Builder({ q, onChange }) {
  // event is a matcher or just an event name: a name stays a name until
  // the matcher gets filters.
  const m = typeof q.event === 'string' ? { event: q.event } : q.event;
  return html`
    <${Field} title="Active users: those who did">
      <${MatcherEditor} m=${m} label="Activity" onChange=${(n) => onChange(set(q, 'event', n.where ? { event: n.event, where: n.where } : typeof q.event === 'string' ? n.event : { event: n.event }))} />
    <//>
    <${Field} title="Interval"><${IntervalRow} q=${q} onChange=${onChange} /><//>`;
}

function Result({ q, res, drill, chartRef, compact }) {
  const hourly = res.interval === 'hour';
  const groups = [{ value: undefined, name: 'All users', buckets: res.buckets },
    ...(res.breakdown || []).map((b) => ({ value: b.value, name: breakdownLabel(q, b.value), buckets: b.buckets }))];
  const [gi, setGi] = useState(0);
  const g = groups[Math.min(gi, groups.length - 1)];
  const labels = g.buckets.map((b) => bucketLabel(b.start, hourly));
  const config = useMemo(() => ({
    type: 'bar',
    data: {
      labels,
      datasets: STATUSES.map(([k, name, color]) => ({
        label: name, data: g.buckets.map((b) => b[k]), status: k,
        backgroundColor: color + 'cc', borderColor: color, borderWidth: 1, stack: 'users',
      })),
    },
    options: {
      scales: { x: { stacked: true }, y: { stacked: true, title: { display: true, text: 'users (dormant below zero)' } } },
      plugins: {
        legend: { position: 'bottom', labels: { boxWidth: 12 } },
        tooltip: { callbacks: { label: (ctx) => `${ctx.dataset.label}: ${num(Math.abs(ctx.parsed.y))}` } },
      },
    },
  }), [res, gi]);
  const bv = g.value === undefined ? {} : { breakdown_value: g.value };
  const pick = (status, i) => drill({ bucket: g.buckets[i].start, status, ...bv }, `${g.name}, ${status} in ${labels[i]}`);
  const cell = (status, i) => {
    const v = g.buckets[i][status];
    return drill && v !== 0 ? html`<${Clickable} onClick=${() => pick(status, i)} attrs=${{ 'data-status': status, 'data-bucket': i }}>${num(v)}<//>` : num(v);
  };
  return html`
    ${groups.length > 1 && !compact ? html`<div class="toolbar" role="group" aria-label="Lifecycle group">
      ${groups.map((x, i) => html`<button type="button" class=${i === gi ? 'chip on' : 'chip'} aria-pressed=${i === gi} onClick=${() => setGi(i)}>${x.name}</button>`)}
    </div>` : null}
    <${ChartView} config=${config} chartRef=${chartRef} height=${compact ? 220 : 340} label="Lifecycle"
      onPick=${drill ? (d, i) => pick(STATUSES[d][0], i) : null} />
    ${compact ? null : html`<div class="scroll"><table class="grid" data-kind="lifecycle" data-breakdown=${g.value ?? null}>
      <caption>${g.name}</caption>
      <thead><tr><th>Bucket</th>${STATUSES.map(([k, name, , hint]) => html`<th class="num" title=${hint}>${name}</th>`)}</tr></thead>
      <tbody>${g.buckets.map((b, i) => html`<tr data-bucket=${i} class=${b.incomplete ? 'incomplete' : null}>
        <td>${labels[i]}${b.incomplete ? html`<span class="mark" title="incomplete bucket">*</span>` : null}</td>
        ${STATUSES.map(([k]) => html`<td class="num" data-col=${k}>${cell(k, i)}</td>`)}</tr>`)}</tbody></table></div>
      <p class="note">${STATUSES.map(([, name, , hint]) => `${name}: ${hint}. `)}
        * incomplete: the bucket extends past the end of the data or past now. Click a number for its users.</p>`}`;
}

export default {
  kind: 'lifecycle', label: 'Lifecycle',
  fields: ['event', 'interval', 'week_start'],
  common: { where: true, breakdown: { sources: ['user'] }, cohort: true },
  interval: (q) => q.interval || 'day',
  defaults: (schema) => ({ interval: 'week', event: topEvent(schema, 0) }),
  // A status belongs to a user: an event-property breakdown is dropped.
  from: (q) => (q.breakdown && q.breakdown.source !== 'user' ? { breakdown: undefined } : {}),
  Builder, Result,
};
