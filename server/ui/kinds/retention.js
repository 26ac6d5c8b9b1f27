// Retention (docs/analytics.md §6): cohorts of users who did the start event, and the
// share who returned in each later period, with every option; a line per
// breakdown value; each cell opens its users.

import { html, useMemo, useState } from '../lib/html.js';
import { topEvent } from '../lib/appctx.js';
import { useApp } from '../lib/appctx.js';
import { set, INTERVALS } from '../lib/query.js';
import { num, pct, bucketLabel, COLORS, breakdownLabel } from '../lib/format.js';
import { Field, Select, MatcherEditor } from '../components/pickers.js';
import { ChartView, Clickable } from '../components/result.js';

const DEFAULT_PERIODS = { hour: 24, day: 7, week: 4, month: 3 };

function Builder({ q, onChange }) {
  return html`
    <${Field} title="Cohort: users who did">
      <${MatcherEditor} m=${q.start} label="Start" onChange=${(m) => onChange(set(q, 'start', m))} />
    <//>
    <${Field} title="Came back and did">
      <${MatcherEditor} m=${q.return || { event: '$any' }} label="Return" onChange=${(m) => onChange(set(q, 'return', m))} />
    <//>
    <${Field} title="Periods">
      <div class="row">
        <${Select} label="Period" options=${INTERVALS.map((v) => [v, v])} value=${q.period || 'day'}
          onChange=${(v) => onChange({ ...q, period: v, periods: DEFAULT_PERIODS[v] })} />
        <input type="number" id="periods" min="1" max="100" aria-label="Periods" value=${q.periods || DEFAULT_PERIODS[q.period || 'day']}
          onInput=${(e) => onChange(set(q, 'periods', Number(e.target.value) || undefined))} />
      </div>
      <div class="row">
        <${Select} label="Cohort type" options=${[['first_time', 'first time'], ['recurring', 'recurring']]} value=${q.type || 'first_time'}
          onChange=${(v) => onChange(set(q, 'type', v))} />
        <${Select} label="Windows" options=${[['calendar', 'calendar periods'], ['rolling', 'rolling periods']]} value=${q.windows || 'calendar'}
          onChange=${(v) => onChange(set(q, 'windows', v))} />
        <${Select} label="Criterion" options=${[['on', 'returned on period k'], ['on_or_after', 'on or after period k']]} value=${q.criterion || 'on'}
          onChange=${(v) => onChange(set(q, 'criterion', v))} />
      </div>
      ${q.period === 'week' ? html`<div class="row"><${Select} label="Week start" options=${[['monday', 'weeks start Monday'], ['sunday', 'weeks start Sunday']]}
          value=${q.week_start || 'monday'} onChange=${(v) => onChange(set(q, 'week_start', v === 'monday' ? undefined : v))} /></div>` : null}
    <//>`;
}

// shade is a retention cell's background: the rate as the opacity of one
// hue.
const shade = (rate) => `rgba(37, 99, 235, ${Math.max(0.04, Math.min(1, Math.sqrt(rate))).toFixed(3)})`;

// meanBy returns, per breakdown value (null without one), the
// user-weighted mean rate per period over the cohorts whose cell is
// complete (null where none is), as the result's "mean" is computed.
function meanBy(res) {
  const by = new Map();
  for (const c of res.cohorts) {
    const k = c.breakdown_value ?? null;
    if (!by.has(k)) by.set(k, { n: [], d: [] });
    const m = by.get(k);
    c.retained.forEach((r, p) => {
      if (c.incomplete[p] || c.size === 0) return;
      m.n[p] = (m.n[p] || 0) + r;
      m.d[p] = (m.d[p] || 0) + c.size;
    });
  }
  return [...by].map(([k, m]) => [k, res.mean.map((_, p) => (m.d[p] ? m.n[p] / m.d[p] : null))]);
}

function Result({ q, res, drill, chartRef, compact }) {
  const [showEmpty, setShowEmpty] = useState(false);
  const hourly = res.period === 'hour';
  const P = res.period.charAt(0).toUpperCase() + res.period.slice(1);
  const lines = useMemo(() => (res.cohorts.some((c) => c.breakdown_value !== null && c.breakdown_value !== undefined)
    ? meanBy(res).map(([k, m]) => [breakdownLabel(q, k), m, k])
    : [['Mean retention (complete cohorts)', res.mean, undefined]]), [res]);
  const config = useMemo(() => ({
    type: 'line',
    data: {
      labels: res.mean.map((_, k) => `${P} ${k}`),
      datasets: lines.map(([label, m], i) => ({ label, data: m.map((v) => (v === null ? null : 100 * v)),
        borderColor: COLORS[i % COLORS.length], backgroundColor: COLORS[i % COLORS.length], borderWidth: 2, pointRadius: 3, spanGaps: false })),
    },
    options: { scales: { y: { beginAtZero: true, max: 100, ticks: { callback: (v) => v + '%' } } },
      plugins: { legend: { position: 'bottom', labels: { boxWidth: 12 } }, tooltip: { callbacks: { label: (c) => `${c.dataset.label}: ${c.parsed.y.toFixed(1)}%` } } } },
  }), [res]);
  const empty = res.cohorts.filter((c) => c.size === 0).length;
  const shown = res.cohorts.filter((c) => showEmpty || c.size > 0);
  const bv = (c) => (c.breakdown_value !== null && c.breakdown_value !== undefined ? { breakdown_value: c.breakdown_value } : {});
  return html`
    ${res.mean.length > 1 ? html`<${ChartView} config=${config} chartRef=${chartRef} height=${compact ? 220 : 300} />` : null}
    ${compact ? null : html`
      ${empty ? html`<p class="note"><label class="inline"><input type="checkbox" checked=${showEmpty} onChange=${(e) => setShowEmpty(e.target.checked)} />
        Show ${empty} empty cohort${empty > 1 ? 's' : ''} (no user did the start event in that ${res.period}${res.cohorts.some((c) => c.breakdown_value != null) ? ' with that value' : ''})</label></p>` : null}
      ${shown.length ? html`<div class="scroll"><table class="grid retention" data-kind="retention">
        <thead><tr><th>Cohort</th><th class="num">Users</th>${res.mean.map((_, k) => html`<th class="num">${P} ${k}</th>`)}</tr></thead>
        <tbody>
          ${shown.map((c) => html`<tr data-cohort=${res.cohorts.indexOf(c)} class=${c.size === 0 ? 'empty-cohort' : null}>
            <th scope="row" data-col="start">${bucketLabel(c.start, hourly)}${c.breakdown_value != null ? html`<span class="bd">${breakdownLabel(q, c.breakdown_value)}</span>` : null}</th>
            <td class="num" data-col="size">${c.size && drill ? html`<${Clickable} onClick=${() => drill({ cohort_start: c.start, period: 0, ...bv(c) }, `cohort ${bucketLabel(c.start, hourly)}`)}>${num(c.size)}<//>` : num(c.size)}</td>
            ${c.retained.map((cnt, k) => {
              const r = c.rates[k], inc = c.incomplete[k];
              if (c.size === 0) return html`<td class="cell none" data-period=${k}>–</td>`;
              const inner = html`<span class="rate">${pct(r)}</span><span class="count">${num(cnt)}</span>${inc ? html`<span class="mark">*</span>` : null}`;
              return html`<td class=${`cell${inc ? ' incomplete' : Math.sqrt(r) > 0.55 ? ' dark' : ''}`} data-period=${k}
                title=${`${pct(r)} (${num(cnt)} of ${num(c.size)})${inc ? ', incomplete period' : ''}`} style=${inc ? null : `background-color:${shade(r)}`}>
                ${drill && cnt > 0 ? html`<${Clickable} onClick=${() => drill({ cohort_start: c.start, period: k, ...bv(c) }, `cohort ${bucketLabel(c.start, hourly)}, ${res.period} ${k}`)}>${inner}<//>` : inner}</td>`;
            })}</tr>`)}
          <tr class="total"><th scope="row">Mean</th><td class="num">${num(res.cohorts.reduce((a, c) => a + c.size, 0))}</td>
            ${res.mean.map((m, k) => html`<td class="num" data-period=${k}>${m === null ? '–' : pct(m)}</td>`)}</tr>
        </tbody></table></div>` : html`<p class="empty">No cohort in this range.</p>`}
      <p class="note">* incomplete: the period extends past the end of the data or past now. The mean is weighted by users over the cohorts whose period is complete.
        Click a cell for its users.</p>`}`;
}

export default {
  kind: 'retention', label: 'Retention',
  fields: ['start', 'return', 'period', 'periods', 'type', 'windows', 'criterion', 'week_start'],
  common: { where: true, breakdown: true, cohort: true },
  defaults: (schema) => ({ start: { event: topEvent(schema, 0) }, return: { event: '$any' }, period: 'week', periods: 8,
    type: 'first_time', windows: 'calendar', criterion: 'on' }),
  Builder, Result,
};
