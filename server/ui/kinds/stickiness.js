// Stickiness (docs/analytics.md §13): for each series, the users by the number of the
// range's calendar buckets they were active in (at least min_events
// matching events), exactly or (cumulative) at least; a bar per count.
// Every count opens its users (list {series, intervals}).

import { html, useMemo } from '../lib/html.js';
import { topEvent, useApp } from '../lib/appctx.js';
import { set, setAt } from '../lib/query.js';
import { num, COLORS, breakdownLabel } from '../lib/format.js';
import { Field, MatcherEditor } from '../components/pickers.js';
import { ChartView, Clickable } from '../components/result.js';
import { IntervalRow } from '../components/common.js';

const letter = (i) => String.fromCharCode(65 + i);

function Builder({ q, onChange }) {
  const { schema } = useApp();
  const series = q.series || [];
  return html`
    <${Field} title="Series" hint="users by the number of intervals they did it in">
      ${series.map((s, i) => html`<div class="item series" data-series=${i}>
        <span class="badge">${letter(i)}</span>
        <div class="grow"><${MatcherEditor} m=${s} label=${`Series ${i + 1}`}
          onChange=${(m) => onChange(set(q, 'series', setAt(series, i, set({ ...s, event: m.event }, 'where', m.where))))} /></div>
        ${series.length > 1 ? html`<button type="button" class="icon" aria-label=${`Remove series ${i + 1}`}
          onClick=${() => onChange(set(q, 'series', setAt(series, i, undefined)))}>×</button>` : null}
      </div>`)}
      <button type="button" class="link" onClick=${() => onChange(set(q, 'series', [...series, { event: topEvent(schema, series.length) }]))}>+ Series</button>
    <//>
    <${Field} title="Interval"><${IntervalRow} q=${q} onChange=${onChange} /><//>
    <${Field} title="Active in an interval">
      <div class="row">
        <label class="narrow">Events at least <input type="number" id="min-events" min="1" placeholder="1" value=${q.min_events || ''}
          onInput=${(e) => onChange(set(q, 'min_events', Number(e.target.value) > 1 ? Number(e.target.value) : undefined))} /></label>
        <label class="inline"><input type="checkbox" id="cumulative" checked=${!!q.cumulative}
          onChange=${(e) => onChange(set(q, 'cumulative', e.target.checked || undefined))} /> cumulative (at least n)</label>
      </div>
    <//>`;
}

// seriesIndex maps each result series to the query series it answers:
// results list the query's series in order, each as one row or one per
// breakdown value (a value at most once), and a series without users
// under a breakdown has no row.
export function seriesIndex(q, res) {
  const qs = q.series || [];
  const name = (s) => s.label || s.event;
  const out = [];
  let s = -1;
  let seen = new Set();
  for (const r of res.series) {
    const same = s >= 0 && name(qs[s]) === r.label && qs[s].event === r.event && !seen.has(r.breakdown_value);
    if (!same) {
      do s++; while (s < qs.length - 1 && !(name(qs[s]) === r.label && qs[s].event === r.event));
      seen = new Set();
    }
    seen.add(r.breakdown_value);
    out.push(s);
  }
  return out;
}

function Result({ q, res, drill, chartRef, compact }) {
  const unit = res.interval;
  const n = res.series[0]?.counts.length || 0;
  const idx = seriesIndex(q, res);
  const names = res.series.map((s, i) => {
    const bd = breakdownLabel(q, s.breakdown_value);
    return `${letter(idx[i])}. ${s.label}${bd ? ' · ' + bd : ''}`;
  });
  const rows = Array.from({ length: n }, (_, k) => `${res.cumulative ? '≥ ' : ''}${k + 1} ${unit}${k ? 's' : ''}`);
  const config = useMemo(() => ({
    type: 'bar',
    data: {
      labels: rows,
      datasets: res.series.map((s, i) => ({
        label: names[i], data: s.counts,
        backgroundColor: COLORS[i % COLORS.length] + 'cc', borderColor: COLORS[i % COLORS.length], borderWidth: 1, borderRadius: 2,
      })),
    },
    options: {
      scales: {
        x: { title: { display: true, text: `${unit}s active in ${res.cumulative ? '(at least)' : '(exactly)'}` } },
        y: { beginAtZero: true, title: { display: true, text: 'users' } },
      },
      plugins: { legend: { position: 'bottom', labels: { boxWidth: 12 } } },
    },
  }), [res]);
  const pick = (i, k) => {
    const s = res.series[i];
    drill({ series: idx[i], intervals: k + 1, ...(s.breakdown_value !== null && s.breakdown_value !== undefined ? { breakdown_value: s.breakdown_value } : {}) },
      `${names[i]}, active in ${rows[k]}`);
  };
  const cell = (i, k) => {
    const v = res.series[i].counts[k];
    return drill && v > 0 ? html`<${Clickable} onClick=${() => pick(i, k)} attrs=${{ 'data-series': i, 'data-intervals': k + 1 }}>${num(v)}<//>` : num(v);
  };
  return html`
    <${ChartView} config=${config} chartRef=${chartRef} height=${compact ? 220 : 320} label="Stickiness" onPick=${drill ? pick : null} />
    ${compact ? null : html`<div class="scroll"><table class="grid" data-kind="stickiness">
      <thead><tr><th>${unit[0].toUpperCase() + unit.slice(1)}s active</th>${names.map((nm) => html`<th class="num" title=${nm}>${nm}</th>`)}</tr></thead>
      <tbody>
        ${rows.map((r, k) => html`<tr data-intervals=${k + 1}><td>${r}</td>${res.series.map((_, i) => html`<td class="num">${cell(i, k)}</td>`)}</tr>`)}
        <tr class="total"><td>Users</td>${res.series.map((s) => html`<td class="num" data-col="users">${num(s.users)}</td>`)}</tr>
      </tbody></table></div>
      <p class="note">${`Users by the number of ${unit}s of the range in which they had at least ${q.min_events || 1} matching `
        + `event${(q.min_events || 1) > 1 ? 's' : ''} (${res.cumulative ? 'at least' : 'exactly'} n). Click a number for its users.`}</p>`}`;
}

export default {
  kind: 'stickiness', label: 'Stickiness',
  fields: ['series', 'interval', 'week_start', 'min_events', 'cumulative'],
  common: { where: true, breakdown: true, cohort: true },
  interval: (q) => q.interval || 'day',
  defaults: (schema) => ({ interval: 'day', series: [{ event: topEvent(schema, 0) }] }),
  Builder, Result,
};
