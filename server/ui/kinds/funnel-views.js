// The funnel's other views (docs/analytics.md §11): conversion over time (a line of
// conversion per bucket of step-1 time, with entered and converted users)
// and time to convert (a histogram of the seconds between two steps).
// Every count opens its users: list {bucket, status} and {bin}.

import { html, useMemo } from '../lib/html.js';
import { num, pct, duration, bucketLabel, COLORS, breakdownLabel } from '../lib/format.js';
import { ChartView, Clickable } from '../components/result.js';

// groups are the result's all-users answer then one per breakdown value:
// {value (undefined for all users), name, part (the answer's object)}.
function groups(q, res) {
  return [{ value: undefined, name: 'All users', part: res },
    ...(res.breakdown || []).map((b) => ({ value: b.value, name: breakdownLabel(q, b.value), part: b }))];
}

const bv = (g) => (g.value === undefined ? {} : { breakdown_value: g.value });

const stepsLabel = (res) => `step ${res.from_step} → ${res.to_step}`;

export function TrendsResult({ q, res, drill, chartRef, compact }) {
  const hourly = (q.interval || 'day') === 'hour';
  const gs = groups(q, res);
  const labels = (res.buckets || []).map((b) => bucketLabel(b.start, hourly));
  const many = labels.length > 200;
  const config = useMemo(() => ({
    type: 'line',
    data: {
      labels,
      datasets: gs.map((g, i) => {
        const bs = g.part.buckets || [];
        return {
          label: g.name, data: bs.map((b) => (b.conversion === null ? null : 100 * b.conversion)),
          borderColor: COLORS[i % COLORS.length], backgroundColor: COLORS[i % COLORS.length],
          borderWidth: g.value === undefined ? 2.5 : 2, pointRadius: many ? 0 : 3, pointHitRadius: 6,
          // The segment into an incomplete bucket is dashed: its users may still convert.
          segment: { borderDash: (ctx) => (bs[ctx.p1DataIndex]?.incomplete ? [6, 4] : undefined) },
          group: g,
        };
      }),
    },
    options: {
      scales: { y: { beginAtZero: true, title: { display: true, text: `conversion ${stepsLabel(res)} (%)` }, ticks: { callback: (v) => v + '%' } } },
      plugins: {
        legend: { position: 'bottom', labels: { boxWidth: 12 } },
        tooltip: { callbacks: { label: (ctx) => {
          const b = ctx.dataset.group.part.buckets[ctx.dataIndex];
          return `${ctx.dataset.label}: ${pct(b.conversion)} (${num(b.converted)} of ${num(b.entered)})${b.incomplete ? ', incomplete' : ''}`;
        } } },
      },
    },
  }), [res]);
  const pick = (g, i, status) => drill({ bucket: res.buckets[i].start, status, ...bv(g) }, `${g.name}, ${status} in ${labels[i]}`);
  const count = (g, i, status) => {
    const v = g.part.buckets[i][status];
    return drill && v > 0 ? html`<${Clickable} onClick=${() => pick(g, i, status)}>${num(v)}<//>` : num(v);
  };
  return html`
    <${ChartView} config=${config} chartRef=${chartRef} height=${compact ? 220 : 320} label="Conversion over time"
      onPick=${drill ? (d, i) => pick(config.data.datasets[d].group, i, 'converted') : null} />
    ${compact ? null : html`<div class="scroll"><table class="grid" data-kind="funnel-trends">
      <thead>
        <tr><th rowspan="2">Bucket (step 1)</th>${gs.map((g) => html`<th colspan="3" class="group">${g.name}</th>`)}</tr>
        <tr>${gs.map(() => html`<th class="num">Entered</th><th class="num">Converted</th><th class="num">Conversion</th>`)}</tr>
      </thead>
      <tbody>${labels.map((l, i) => html`<tr data-bucket=${i} class=${res.buckets[i].incomplete ? 'incomplete' : null}>
        <td>${l}${res.buckets[i].incomplete ? html`<span class="mark" title="incomplete: its users may still convert">*</span>` : null}</td>
        ${gs.map((g, k) => html`<td class="num" data-group=${k} data-col="entered">${count(g, i, 'entered')}</td>
          <td class="num" data-group=${k} data-col="converted">${count(g, i, 'converted')}</td>
          <td class="num" data-group=${k} data-col="conversion">${pct(g.part.buckets[i].conversion)}</td>`)}
      </tr>`)}</tbody></table></div>
      <p class="note">${`Attempts by the bucket of their step-1 event: entered reached step ${res.from_step}, converted reached step ${res.to_step} `
        + `within ${duration(res.window_seconds)}. * incomplete: the bucket's end plus the window is past the end of the data or now, so its users may `
        + 'still convert. Click a count or a point for its users.'}</p>`}`;
}

export function TimesResult({ q, res, drill, chartRef, compact }) {
  const gs = groups(q, res);
  const bins = res.histogram || [];
  const labels = bins.map((b) => `${duration(b.from_seconds)}–${duration(b.to_seconds)}`);
  // With a breakdown the chart shows the values side by side on the
  // shared bins (all users in the table).
  const shown = gs.length > 1 ? gs.slice(1) : gs;
  const config = useMemo(() => ({
    type: 'bar',
    data: {
      labels,
      datasets: shown.map((g, i) => ({
        label: g.name, data: (g.part.histogram || []).map((b) => b.users),
        backgroundColor: COLORS[i % COLORS.length] + 'cc', borderColor: COLORS[i % COLORS.length], borderWidth: 1, borderRadius: 2,
        categoryPercentage: 0.9, barPercentage: 0.95, group: g,
      })),
    },
    options: {
      scales: { x: { title: { display: true, text: `time from ${stepsLabel(res)}` } }, y: { beginAtZero: true, title: { display: true, text: 'users' } } },
      plugins: { legend: { display: shown.length > 1, position: 'bottom', labels: { boxWidth: 12 } } },
    },
  }), [res]);
  const pick = (g, i) => drill({ bin: i, ...bv(g) }, `${g.name}, converted in ${labels[i]}`);
  const users = (g, i) => {
    const v = g.part.histogram?.[i]?.users ?? 0;
    return drill && v > 0 ? html`<${Clickable} onClick=${() => pick(g, i)}>${num(v)}<//>` : num(v);
  };
  return html`
    <${ChartView} config=${config} chartRef=${chartRef} height=${compact ? 220 : 320} label="Time to convert"
      onPick=${drill ? (d, i) => pick(config.data.datasets[d].group, i) : null} />
    ${compact ? null : html`<div class="scroll"><table class="grid" data-kind="funnel-times">
      <thead><tr><th>Bin</th><th class="num">From</th><th class="num">To</th>${gs.map((g) => html`<th class="num">${g.name}</th>`)}</tr></thead>
      <tbody>
        ${bins.map((b, i) => html`<tr data-bin=${i}><td>${i}</td><td class="num">${duration(b.from_seconds)}</td>
          <td class="num">${duration(b.to_seconds)}${i === bins.length - 1 ? ' (incl.)' : ''}</td>
          ${gs.map((g, k) => html`<td class="num" data-group=${k} data-col="users">${users(g, i)}</td>`)}</tr>`)}
        <tr class="total"><td colspan="3">Users</td>${gs.map((g) => html`<td class="num">${num(g.part.users)}</td>`)}</tr>
        <tr><td colspan="3">Average</td>${gs.map((g) => html`<td class="num">${duration(g.part.average_seconds)}</td>`)}</tr>
        <tr><td colspan="3">Median</td>${gs.map((g) => html`<td class="num">${duration(g.part.median_seconds)}</td>`)}</tr>
      </tbody></table></div>
      <p class="note">${`Users who reached step ${res.to_step} within ${duration(res.window_seconds)}, by the time from step ${res.from_step} to step ${res.to_step} `
        + 'of their counted attempt; each bin holds its start, the last one its end too. Click a count or a bar for its users.'}</p>`}`;
}
