// Trend (docs/analytics.md §4): series of event matchers with one of 16 maths, by
// calendar interval, with per-series filters, a breakdown and totals.

import { html, useMemo } from '../lib/html.js';
import { topEvent, props } from '../lib/appctx.js';
import { useApp } from '../lib/appctx.js';
import { set, setAt } from '../lib/query.js';
import { num, bucketLabel, COLORS, breakdownLabel } from '../lib/format.js';
import { Field, Select, MatcherEditor, PropertySelect, splitProp } from '../components/pickers.js';
import { ChartView, Clickable } from '../components/result.js';
import { IntervalRow } from '../components/common.js';

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
    <${Field} title="Interval"><${IntervalRow} q=${q} onChange=${onChange} /><//>
    <${Formulas} q=${q} onChange=${onChange} />
    <${Field} title="Compare" hint="every series and formula, for an earlier period too">
      <${Select} label="Compare with" options=${COMPARE} value=${q.compare || ''} onChange=${(v) => onChange(set(q, 'compare', v || undefined))} />
    <//>`;
}

// COMPARE are the comparisons of docs/analytics.md §12: the previous period of the
// same length, or the range shifted back by an offset.
const COMPARE = [['', 'no comparison'], ['previous', 'the previous period'], ['-1d', 'a day earlier'], ['-1w', 'a week earlier'],
  ['-4w', '4 weeks earlier'], ['-1mo', 'a month earlier'], ['-3mo', '3 months earlier'], ['-1y', 'a year earlier']];

// Formulas edits formulas (a list) and formula (one string, evaluated
// after them; shown when a link has it) over the series' letters.
function Formulas({ q, onChange }) {
  const list = q.formulas || [];
  const letters = (q.series || []).map((_, i) => letter(i)).join(', ');
  const input = (value, label, onInput, onRemove) => html`<div class="item formula">
    <span class="badge f">ƒ</span>
    <input class="grow" aria-label=${label} placeholder=${`e.g. A / B * 100 (letters ${letters})`} value=${value}
      onInput=${(e) => onInput(e.target.value)} />
    <button type="button" class="icon" aria-label=${`Remove ${label.toLowerCase()}`} onClick=${onRemove}>×</button></div>`;
  return html`<${Field} title="Formulas" hint=${`over the series ${letters}`}>
    ${list.map((f, i) => input(f, `Formula ${i + 1}`, (v) => onChange(set(q, 'formulas', setAt(list, i, v))),
      () => { const l = setAt(list, i, undefined); onChange(set(q, 'formulas', l.length ? l : undefined)); }))}
    ${q.formula !== undefined ? input(q.formula, 'Formula', (v) => onChange(set(q, 'formula', v)), () => onChange(set(q, 'formula', undefined))) : null}
    <button type="button" class="link" onClick=${() => onChange(set(q, 'formulas', [...list, (q.series || []).length > 1 ? 'A / B' : 'A']))}>+ Formula</button>
  <//>`;
}

// seriesName is a result series' legend: "A. signup · unique users ·
// platform = ios", with " (previous)" for a compared period's.
function seriesName(q, s, i) {
  const math = MATHS.find(([m]) => m === s.math)?.[1] || s.math;
  const what = s.property ? `${math.replace(' of property', '')} of ${s.property}` : math;
  const idx = s.series ?? i;
  const bd = breakdownLabel(q, s.breakdown_value);
  return `${letter(idx)}. ${s.label} · ${what}${bd ? ' · ' + bd : ''}${s.period === 'previous' ? ' (previous)' : ''}`;
}

const formulaName = (q, f) => {
  const bd = breakdownLabel(q, f.breakdown_value);
  return `ƒ ${f.label}${bd ? ' · ' + bd : ''}${f.period === 'previous' ? ' (previous)' : ''}`;
};

// lines are the result's series then formulas, each with its color: a
// previous period's line has its current line's color (and is dashed).
function lines(q, res) {
  const colors = new Map();
  const color = (key) => {
    if (!colors.has(key)) colors.set(key, COLORS[colors.size % COLORS.length]);
    return colors.get(key);
  };
  const series = res.series.map((s, i) => ({ kind: 'series', i, s, name: seriesName(q, s, i), values: s.buckets.map((b) => b.value), total: s.total,
    prev: s.period === 'previous', color: color(`s${s.series ?? i}|${s.breakdown_value}`) }));
  const formulas = (res.formulas || []).map((f, i) => ({ kind: 'formula', i, s: f, name: formulaName(q, f), values: f.buckets.map((b) => b.value), total: f.total,
    prev: f.period === 'previous', color: color(`f${f.formula}|${f.breakdown_value}`) }));
  return [...series, ...formulas];
}

function Result({ q, res, drill, chartRef, compact }) {
  const hourly = (q.interval || 'day') === 'hour';
  const current = res.series.find((s) => s.period !== 'previous') || res.series[0];
  const all = lines(q, res);
  // Buckets align by position; a compared period may have one more
  // (labelled by its own start).
  const n = Math.max(0, ...all.map((l) => l.values.length));
  const previous = res.series.find((s) => s.period === 'previous');
  const labels = Array.from({ length: n }, (_, b) => (current?.buckets[b] ? bucketLabel(current.buckets[b].start, hourly)
    : `(previous ${bucketLabel(previous.buckets[b].start, hourly)})`));
  const incomplete = labels.map((_, b) => !!current?.buckets[b]?.incomplete);
  const many = labels.length > 200;
  const twoAxes = all.some((l) => l.kind === 'formula') && all.some((l) => l.kind === 'series');
  const config = useMemo(() => ({
    type: 'line',
    data: {
      labels,
      datasets: all.map((l) => ({
        label: l.name,
        data: l.values,
        yAxisID: twoAxes && l.kind === 'formula' ? 'y2' : 'y',
        borderColor: l.prev ? l.color + '99' : l.color, backgroundColor: l.prev ? l.color + '99' : l.color,
        borderWidth: l.kind === 'formula' ? 2.5 : 2, pointRadius: many ? 0 : 3, pointHitRadius: 6,
        pointStyle: l.kind === 'formula' ? 'rectRot' : 'circle',
        borderDash: l.prev ? [4, 3] : undefined,
        starts: l.s.buckets.map((b) => b.start),
        // The segment into an incomplete bucket is dashed.
        segment: l.prev ? undefined : { borderDash: (ctx) => (incomplete[ctx.p1DataIndex] ? [6, 4] : undefined) },
        line: l,
      })),
    },
    options: {
      scales: {
        y: { beginAtZero: true, ...(twoAxes ? { title: { display: true, text: 'series' } } : {}) },
        ...(twoAxes ? { y2: { position: 'right', beginAtZero: true, grid: { drawOnChartArea: false }, title: { display: true, text: 'formulas' } } } : {}),
      },
      plugins: {
        legend: { position: 'bottom', labels: { boxWidth: 12, boxHeight: 8, usePointStyle: true, pointStyleWidth: 12 } },
        // A previous period's point is titled with its own bucket.
        tooltip: { callbacks: { title: (items) => items.map((it) => bucketLabel(it.dataset.starts[it.dataIndex] || '', hourly)).filter((v, i, a) => a.indexOf(v) === i).join(' / ') } },
      },
    },
  }), [res]);
  const canDrill = (l) => drill && l.kind === 'series';
  const pick = (l, b) => {
    const s = l.s;
    const list = { series: s.series ?? l.i, bucket: b === undefined ? undefined : s.buckets[b].start,
      ...(s.breakdown_value !== null && s.breakdown_value !== undefined ? { breakdown_value: s.breakdown_value } : {}) };
    const title = `${l.name}${b === undefined ? ', whole range' : ', ' + bucketLabel(s.buckets[b].start, hourly)}`;
    // A compared period's users: its own range, asked without compare
    // (the engine computes that period exactly so).
    drill(list, title, l.prev ? { range: res.compare_range, compare: undefined, formulas: undefined, formula: undefined } : undefined);
  };
  const cell = (l, b, v) => (canDrill(l)
    ? html`<${Clickable} onClick=${() => pick(l, b)} attrs=${{ 'data-series': l.i, 'data-bucket': b ?? 'total', 'data-period': l.prev ? 'previous' : null }}
        title=${USER_MATHS.has(l.s.math) ? 'Show these users' : 'Show the users behind this number'}>${num(v)}<//>`
    : html`<span data-formula=${l.kind === 'formula' ? l.i : null} data-bucket=${b ?? 'total'}>${num(v)}</span>`);
  return html`
    <${ChartView} config=${config} chartRef=${chartRef} height=${compact ? 220 : 340}
      onPick=${drill ? (d, i) => { const l = config.data.datasets[d].line; if (canDrill(l)) pick(l, i); } : null} />
    ${compact ? null : html`<div class="scroll"><table class="grid" data-kind="trend">
      <thead><tr><th>Bucket</th>${all.map((l) => html`<th class=${l.kind === 'formula' ? 'num formula' : 'num'} title=${l.name}>${l.name}</th>`)}</tr></thead>
      <tbody>
        ${labels.map((lb, b) => html`<tr data-bucket=${b} class=${incomplete[b] ? 'incomplete' : null}>
          <td>${lb}${incomplete[b] ? html`<span class="mark" title="incomplete bucket">*</span>` : null}</td>
          ${all.map((l) => html`<td class="num">${l.values[b] === undefined ? '' : cell(l, b, l.values[b])}</td>`)}</tr>`)}
        <tr class="total"><td>Total</td>${all.map((l) => html`<td class="num" data-col="total">${cell(l, undefined, l.total)}</td>`)}</tr>
      </tbody></table></div>
      <p class="note">${'* incomplete: the bucket extends past the end of the data or past now. Totals of unique users count each user once over the range. '
        + (res.formulas?.length ? 'A formula\'s total is the formula over the series\' totals; – is a division by zero. ' : '')
        + (res.compare_range ? `Dashed: the compared period ${res.compare_range.from.slice(0, 10)} – ${res.compare_range.to.slice(0, 10)}, bucket by bucket in order. ` : '')
        + 'Click a number for its users.'}</p>`}`;
}

export default {
  kind: 'trend', label: 'Trend',
  fields: ['interval', 'week_start', 'series', 'formulas', 'formula', 'compare'],
  common: { where: true, breakdown: true, cohort: true },
  interval: (q) => q.interval || 'day',
  defaults: (schema) => ({ interval: 'day', series: [{ event: topEvent(schema, 0), math: 'count' }] }),
  Builder, Result,
};
