// Result rendering: a Chart.js chart and a table per result kind, its
// warnings, the stats line, the timing tree of ?trace=1, and the loading
// and error states.

import { h, clear } from './dom.js';

const Chart = window.Chart;
const $ = (id) => document.getElementById(id);
const COLORS = ['#2563eb', '#db2777', '#16a34a', '#ea580c', '#7c3aed', '#0891b2', '#ca8a04', '#dc2626', '#4b5563', '#65a30d'];
const nf = new Intl.NumberFormat('en-US');
const num = (v) => (Number.isInteger(v) ? nf.format(v) : nf.format(Math.round(v * 100) / 100));
const pct = (f) => (100 * f).toFixed(1) + '%';

let chart = null;

// duration renders seconds the way the CLI table does: 45s, 13m 0s,
// 19h 2m, 2.5d; "–" for null.
export function duration(sec) {
  if (sec === null || sec === undefined) return '–';
  const s = Math.round(sec);
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${s % 60}s`;
  if (s < 48 * 3600) {
    const m = Math.round(s / 60);
    return `${Math.floor(m / 60)}h ${m % 60}m`;
  }
  return `${(s / 86400).toFixed(1)}d`;
}

// bucketLabel shortens an RFC 3339 bucket start (already in the query's
// zone) to its date, or date and time for sub-day buckets.
function bucketLabel(start, hourly) {
  return hourly ? start.slice(0, 16).replace('T', ' ') : start.slice(0, 10);
}

function destroyChart() {
  chart?.destroy();
  chart = null;
  $('chart-box').hidden = true;
}

export function resetResult() {
  destroyChart();
  clear($('status'));
  clear($('table'));
  clear($('stats'));
  $('trace-box').hidden = true;
  $('json-box').hidden = true;
  $('result').classList.remove('busy');
}

export function renderLoading(q) {
  $('result').classList.add('busy');
  $('result').setAttribute('aria-busy', 'true');
  clear($('status')).append(h('div', { class: 'loading', role: 'status' }, h('span', { class: 'spinner' }), `Running ${q.kind} query…`));
}

export function renderError(err) {
  resetResult();
  $('result').removeAttribute('aria-busy');
  clear($('status')).append(h('div', { class: 'error', role: 'alert' },
    h('strong', {}, err.code || 'error'),
    err.field ? h('code', {}, err.field) : null,
    h('span', {}, err.message || String(err))));
}

// renderWarnings shows a result's spec §9 warnings (an event or value
// that occurs nowhere in the app) above the result.
function renderWarnings(ws) {
  if (!ws?.length) return;
  $('status').append(...ws.map((w) => h('div', { class: 'warning', role: 'status' },
    h('strong', {}, 'warning'),
    w.field ? h('code', {}, w.field) : null,
    h('span', {}, w.message))));
}

export function renderResult(q, res) {
  resetResult();
  $('result').removeAttribute('aria-busy');
  renderWarnings(res.warnings);
  ({ trend: renderTrend, funnel: renderFunnel, retention: renderRetention }[res.kind])(q, res);
  renderStats(res.stats);
  if (res.trace) {
    clear($('trace')).append(traceTree(res.trace));
    $('trace-box').hidden = false;
  }
  const { trace, ...plain } = res;
  $('json').textContent = JSON.stringify({ query: q, result: plain }, null, 2);
  $('json-box').hidden = false;
}

function newChart(config) {
  $('chart-box').hidden = false;
  chart = new Chart($('chart'), {
    ...config,
    options: {
      responsive: true, maintainAspectRatio: false, animation: false,
      interaction: { mode: 'index', intersect: false },
      plugins: { legend: { position: 'bottom', labels: { boxWidth: 12 } } },
      ...config.options,
    },
  });
}

function seriesName(s) {
  const label = s.label === '$any' ? 'Any event' : s.label;
  return s.breakdown_value === null || s.breakdown_value === undefined ? label : `${label} · ${s.breakdown_value}`;
}

function renderTrend(q, res) {
  const hourly = q.interval === 'hour';
  const first = res.series[0];
  const labels = (first?.buckets || []).map((b) => bucketLabel(b.start, hourly));
  const incomplete = (first?.buckets || []).map((b) => b.incomplete);
  newChart({
    type: 'line',
    data: {
      labels,
      datasets: res.series.map((s, i) => ({
        label: `${seriesName(s)} (${s.math})`,
        data: s.buckets.map((b) => b.value),
        borderColor: COLORS[i % COLORS.length], backgroundColor: COLORS[i % COLORS.length],
        borderWidth: 2, pointRadius: labels.length > 60 ? 0 : 2,
        // Segments reaching an incomplete bucket are dashed.
        segment: { borderDash: (ctx) => (incomplete[ctx.p1DataIndex] ? [6, 4] : undefined) },
      })),
    },
    options: { scales: { y: { beginAtZero: true } } },
  });
  const head = h('tr', {}, h('th', {}, 'Bucket'), ...res.series.map((s) => h('th', { class: 'num' }, `${seriesName(s)} (${s.math})`)));
  const rows = labels.map((l, b) => h('tr', { 'data-bucket': b, class: incomplete[b] ? 'incomplete' : null },
    h('td', {}, l, incomplete[b] ? h('span', { class: 'mark', title: 'incomplete bucket' }, '*') : null),
    ...res.series.map((s) => h('td', { class: 'num' }, num(s.buckets[b].value)))));
  const total = h('tr', { class: 'total' }, h('td', {}, 'Total'), ...res.series.map((s) => h('td', { class: 'num', 'data-col': 'total' }, num(s.total))));
  $('table').append(h('div', { class: 'scroll' }, h('table', { class: 'grid', 'data-kind': 'trend' }, h('thead', {}, head), h('tbody', {}, rows, total))),
    h('p', { class: 'note' }, '* incomplete: the bucket extends past the end of the data or past now. Totals of unique users count each user once over the whole range.'));
}

// barLabels draws each funnel bar's conversion above it.
const barLabels = {
  id: 'barLabels',
  afterDatasetsDraw(c) {
    const { ctx } = c;
    c.data.datasets.forEach((ds, i) => {
      const meta = c.getDatasetMeta(i);
      if (meta.hidden || !ds.barText) return;
      meta.data.forEach((bar, j) => {
        ctx.save();
        ctx.font = '600 12px system-ui, sans-serif';
        ctx.fillStyle = '#111827';
        ctx.textAlign = 'center';
        ctx.textBaseline = 'bottom';
        ctx.fillText(ds.barText[j], bar.x, bar.y - 4);
        ctx.restore();
      });
    });
  },
};

function funnelTable(steps, caption) {
  const head = h('tr', {}, ...['Step', 'Event', 'Users', 'Conversion', 'From previous', 'Avg time', 'Median time']
    .map((t, i) => h('th', { class: i >= 2 ? 'num' : null }, t)));
  const rows = steps.map((s) => h('tr', { 'data-step': s.step },
    h('td', {}, String(s.step)),
    h('td', {}, s.event),
    h('td', { class: 'num', 'data-col': 'users' }, num(s.users)),
    h('td', { class: 'num', 'data-col': 'conversion' }, h('span', { class: 'bar', style: `--w:${(100 * s.conversion).toFixed(1)}%` }), h('span', { class: 'v' }, pct(s.conversion))),
    h('td', { class: 'num', 'data-col': 'conversion_from_previous' }, pct(s.conversion_from_previous)),
    h('td', { class: 'num', 'data-col': 'avg_seconds' }, duration(s.avg_seconds)),
    h('td', { class: 'num', 'data-col': 'median_seconds' }, duration(s.median_seconds))));
  return h('table', { class: 'grid', 'data-kind': 'funnel', 'data-breakdown': caption ?? null },
    caption !== undefined ? h('caption', {}, caption) : null, h('thead', {}, head), h('tbody', {}, rows));
}

function renderFunnel(q, res) {
  const groups = res.breakdown?.length ? res.breakdown.map((b) => ({ name: b.value, steps: b.steps })) : [{ name: 'All users', steps: res.steps }];
  newChart({
    type: 'bar',
    data: {
      labels: res.steps.map((s) => `${s.step}. ${s.event}`),
      datasets: groups.map((g, i) => ({
        label: g.name,
        data: g.steps.map((s) => s.users),
        backgroundColor: COLORS[i % COLORS.length] + 'cc',
        borderColor: COLORS[i % COLORS.length], borderWidth: 1, borderRadius: 3,
        barText: g.steps.map((s) => `${pct(s.conversion)} · ${num(s.users)}`),
        steps: g.steps,
      })),
    },
    options: {
      scales: { y: { beginAtZero: true, grace: '12%', title: { display: true, text: 'users' } } },
      plugins: {
        legend: { display: groups.length > 1, position: 'bottom' },
        tooltip: { callbacks: { afterLabel: (ctx) => {
          const s = ctx.dataset.steps[ctx.dataIndex];
          return s.step === 1 ? '' : `from previous ${pct(s.conversion_from_previous)}, median time ${duration(s.median_seconds)}`;
        } } },
      },
    },
    plugins: [barLabels],
  });
  $('table').append(funnelTable(res.steps, res.breakdown?.length ? 'All users' : undefined));
  for (const b of res.breakdown || []) $('table').append(funnelTable(b.steps, b.value));
  $('table').append(h('p', { class: 'note' }, `Conversion window ${duration(res.window_seconds)}. Times are from the previous step, over the users who reached the step.`));
}

// shade returns the background of a retention cell: the rate as the
// opacity of one hue (Luft's retention report style).
function shade(rate) {
  const a = Math.max(0.04, Math.min(1, Math.sqrt(rate)));
  return `rgba(37, 99, 235, ${a.toFixed(3)})`;
}

function renderRetention(q, res) {
  const n = res.mean.length;
  const hourly = res.period === 'hour';
  const periodName = res.period.charAt(0).toUpperCase() + res.period.slice(1);
  if (n > 1) {
    newChart({
      type: 'line',
      data: {
        labels: res.mean.map((_, k) => `${periodName} ${k}`),
        datasets: [{ label: 'Mean retention (complete cohorts)', data: res.mean.map((m) => (m === null ? null : 100 * m)),
          borderColor: COLORS[0], backgroundColor: COLORS[0], borderWidth: 2, pointRadius: 3, spanGaps: false }],
      },
      options: { scales: { y: { beginAtZero: true, max: 100, ticks: { callback: (v) => v + '%' } } },
        plugins: { tooltip: { callbacks: { label: (c) => `${c.parsed.y.toFixed(1)}%` } } } },
    });
  }
  const head = h('tr', {}, h('th', {}, 'Cohort'), h('th', { class: 'num' }, 'Users'),
    ...res.mean.map((_, k) => h('th', { class: 'num' }, `${periodName} ${k}`)));
  const rows = res.cohorts.map((c, i) => h('tr', { 'data-cohort': i },
    h('th', { scope: 'row', 'data-col': 'start' }, bucketLabel(c.start, hourly),
      c.breakdown_value !== null && c.breakdown_value !== undefined ? h('span', { class: 'bd' }, c.breakdown_value) : null),
    h('td', { class: 'num', 'data-col': 'size' }, num(c.size)),
    ...c.retained.map((cnt, k) => {
      const r = c.rates[k];
      const inc = c.incomplete[k];
      return h('td', {
        class: `cell${inc ? ' incomplete' : Math.sqrt(r) > 0.55 ? ' dark' : ''}`,
        'data-period': k, title: `${pct(r)} (${nf.format(cnt)} of ${nf.format(c.size)})${inc ? ', incomplete period' : ''}`,
        style: inc ? null : `background-color:${shade(r)}`,
      }, h('span', { class: 'rate' }, pct(r)), h('span', { class: 'count' }, nf.format(cnt)), inc ? h('span', { class: 'mark' }, '*') : null);
    })));
  const mean = h('tr', { class: 'total' }, h('th', { scope: 'row' }, 'Mean'),
    h('td', { class: 'num' }, nf.format(res.cohorts.reduce((a, c) => a + c.size, 0))),
    ...res.mean.map((m, k) => h('td', { class: 'num', 'data-period': k }, m === null ? '–' : pct(m))));
  $('table').append(
    res.cohorts.length
      ? h('table', { class: 'grid retention', 'data-kind': 'retention' }, h('thead', {}, head), h('tbody', {}, rows, mean))
      : h('p', { class: 'empty' }, 'No cohort in this range.'),
    h('p', { class: 'note' }, '* incomplete: the period extends past the end of the data or past now. The mean is weighted by users over the cohorts whose period is complete.'));
}

function renderStats(st) {
  if (!st) return;
  const kb = (b) => (b >= 1 << 20 ? `${(b / (1 << 20)).toFixed(1)} MiB` : `${(b / 1024).toFixed(1)} KiB`);
  clear($('stats')).append(
    `${st.wall_ms} ms · ${nf.format(st.events_scanned)} events scanned · ${st.segments_read} segments read, ${st.segments_skipped} skipped · ` +
    `${kb(st.bytes_read)} read · ${kb(st.peak_memory_bytes)} query memory · ${st.workers} workers`);
}

function traceTree(span) {
  const label = `${span.name}${span.id !== undefined ? ' ' + span.id : ''}`;
  return h('ul', { class: 'trace' }, h('li', {},
    h('span', { class: 'span-name' }, label), ' ', h('span', { class: 'span-ms' }, `${span.ms} ms`),
    ...(span.children || []).map(traceTree)));
}
