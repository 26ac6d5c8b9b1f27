// Trend (spec §4): series of event matchers with one of 16 maths, by
// calendar interval, with per-series filters, a breakdown and totals.

import { html, useMemo } from '../lib/html.js';
import { topEvent, props } from '../lib/appctx.js';
import { useApp } from '../lib/appctx.js';
import { set, setAt, INTERVALS } from '../lib/query.js';
import { num, bucketLabel, COLORS, breakdownLabel } from '../lib/format.js';
import { Field, Select, MatcherEditor, PropertySelect, splitProp } from '../components/pickers.js';
import { ChartView, Clickable } from '../components/result.js';

export const MATHS = [
  ['count', 'Total count'], ['users', 'Unique users'], ['wau', 'Weekly active users'], ['mau', 'Monthly active users'],
  ['count_per_user_avg', 'Count per user (average)'], ['count_per_user_median', 'Count per user (median)'], ['count_per_user_max', 'Count per user (max)'],
  ['sum', 'Sum of property'], ['avg', 'Average of property'], ['min', 'Minimum of property'], ['max', 'Maximum of property'],
  ['median', 'Median of property'], ['p75', '75th percentile of property'], ['p90', '90th percentile of property'],
  ['p95', '95th percentile of property'], ['p99', '99th percentile of property'],
];
const PROPERTY_MATHS = new Set(['sum', 'avg', 'min', 'max', 'median', 'p75', 'p90', 'p95', 'p99']);
// USER_MATHS count users: their number is exactly the users listed.
export const USER_MATHS = new Set(['users', 'wau', 'mau']);

const letter = (i) => String.fromCharCode(65 + i);

function firstNumeric(schema) {
  return props(schema, 'event').find((p) => p.type === 'int' || p.type === 'float')?.name;
}

function Builder({ q, onChange }) {
  const { schema } = useApp();
  const series = q.series || [];
  const setSeries = (i, s) => onChange(set(q, 'series', setAt(series, i, s)));
  return html`
    <${Field} title="Series">
      ${series.map((s, i) => html`<div class="item series" data-series=${i}>
        <span class="badge">${letter(i)}</span>
        <div class="grow">
          <${MatcherEditor} m=${s} label=${`Series ${i + 1}`} onChange=${(m) => setSeries(i, { ...s, ...m, where: m.where })} />
          <div class="row">
            <${Select} label=${`Series ${i + 1} math`} options=${MATHS} value=${s.math || 'count'}
              onChange=${(math) => {
                let n = { ...s, math };
                n = PROPERTY_MATHS.has(math) ? { ...n, property: s.property || firstNumeric(schema) || '' } : set(n, 'property', undefined);
                setSeries(i, n);
              }} />
            ${PROPERTY_MATHS.has(s.math) ? html`<${PropertySelect} label=${`Series ${i + 1} property`} sources=${['event']} numeric
              value=${`event:${s.property || ''}`} onChange=${(v) => setSeries(i, { ...s, property: splitProp(v)[1] })} />` : null}
          </div>
        </div>
        ${series.length > 1 ? html`<button type="button" class="icon" aria-label=${`Remove series ${i + 1}`}
          onClick=${() => onChange(set(q, 'series', setAt(series, i, undefined)))}>×</button>` : null}
      </div>`)}
      <button type="button" class="link" onClick=${() => onChange(set(q, 'series', [...series, { event: topEvent(schema, 0), math: 'users' }]))}>+ Series</button>
    <//>
    <${Field} title="Interval">
      <div class="row">
        <${Select} label="Interval" options=${INTERVALS.map((v) => [v, v])} value=${q.interval || 'day'} onChange=${(v) => onChange(set(q, 'interval', v))} />
        ${q.interval === 'week' || q.week_start ? html`<${Select} label="Week start" options=${[['monday', 'weeks start Monday'], ['sunday', 'weeks start Sunday']]}
          value=${q.week_start || 'monday'} onChange=${(v) => onChange(set(q, 'week_start', v === 'monday' ? undefined : v))} />` : null}
      </div>
    <//>`;
}

// seriesName is a result series' legend: "A. signup · unique users ·
// platform = ios".
function seriesName(q, s, i) {
  const math = MATHS.find(([m]) => m === s.math)?.[1] || s.math;
  const what = s.property ? `${math.replace(' of property', '')} of ${s.property}` : math;
  const idx = s.series ?? i;
  const bd = breakdownLabel(q, s.breakdown_value);
  return `${letter(idx)}. ${s.label} · ${what}${bd ? ' · ' + bd : ''}${s.period === 'previous' ? ' (previous)' : ''}`;
}

function Result({ q, res, drill, chartRef, compact }) {
  const hourly = (q.interval || 'day') === 'hour';
  const labels = res.series[0]?.buckets.map((b) => bucketLabel(b.start, hourly)) || [];
  const incomplete = res.series[0]?.buckets.map((b) => b.incomplete) || [];
  const many = labels.length > 200;
  const config = useMemo(() => ({
    type: 'line',
    data: {
      labels,
      datasets: res.series.map((s, i) => ({
        label: seriesName(q, s, i),
        data: s.buckets.map((b) => b.value),
        borderColor: COLORS[i % COLORS.length], backgroundColor: COLORS[i % COLORS.length],
        borderWidth: 2, pointRadius: many ? 0 : 3, pointHitRadius: 6, tension: 0.2,
        borderDash: s.period === 'previous' ? [4, 3] : undefined,
        // The segment into an incomplete bucket is dashed.
        segment: { borderDash: (ctx) => (incomplete[ctx.p1DataIndex] ? [6, 4] : undefined) },
      })),
    },
    options: { scales: { y: { beginAtZero: true } }, plugins: { legend: { position: 'bottom', labels: { boxWidth: 12 } } } },
  }), [res]);
  const pick = (s, b) => drill && drill({ series: res.series[s].series ?? s, bucket: b === undefined ? undefined : res.series[s].buckets[b].start,
    ...(res.series[s].breakdown_value !== null && res.series[s].breakdown_value !== undefined ? { breakdown_value: res.series[s].breakdown_value } : {}) },
  `${seriesName(q, res.series[s], s)}${b === undefined ? ', whole range' : ', ' + labels[b]}`);
  const cell = (s, b, v) => (drill && res.series[s].period !== 'previous'
    ? html`<${Clickable} onClick=${() => pick(s, b)} attrs=${{ 'data-series': s, 'data-bucket': b ?? 'total' }}
        title=${USER_MATHS.has(res.series[s].math) ? 'Show these users' : 'Show the users behind this number'}>${num(v)}<//>`
    : num(v));
  return html`
    <${ChartView} config=${config} chartRef=${chartRef} height=${compact ? 220 : 340} onPick=${drill ? (d, i) => pick(d, i) : null} />
    ${compact ? null : html`<div class="scroll"><table class="grid" data-kind="trend">
      <thead><tr><th>Bucket</th>${res.series.map((s, i) => html`<th class="num" title=${seriesName(q, s, i)}>${seriesName(q, s, i)}</th>`)}</tr></thead>
      <tbody>
        ${labels.map((l, b) => html`<tr data-bucket=${b} class=${incomplete[b] ? 'incomplete' : null}>
          <td>${l}${incomplete[b] ? html`<span class="mark" title="incomplete bucket">*</span>` : null}</td>
          ${res.series.map((s, i) => html`<td class="num">${cell(i, b, s.buckets[b].value)}</td>`)}</tr>`)}
        <tr class="total"><td>Total</td>${res.series.map((s, i) => html`<td class="num" data-col="total">${cell(i, undefined, s.total)}</td>`)}</tr>
      </tbody></table></div>
      <p class="note">* incomplete: the bucket extends past the end of the data or past now. Totals of unique users count each user once over the range.
        Click a number for its users.</p>`}`;
}

export default {
  kind: 'trend', label: 'Trend',
  fields: ['interval', 'week_start', 'series', 'formulas', 'formula', 'compare'],
  common: { where: true, breakdown: true, cohort: true },
  defaults: (schema) => ({ interval: 'day', series: [{ event: topEvent(schema, 0), math: 'count' }] }),
  Builder, Result,
};
