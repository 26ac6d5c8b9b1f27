// Pieces of every result view: the Chart.js chart (with PNG export), the
// result's warnings (docs/analytics.md §9), the stats line and the timing tree.

import { html, useEffect, useRef } from '../lib/html.js';
import { num } from '../lib/format.js';
import { download } from '../lib/api.js';

const Chart = window.Chart;

// whiteBackground paints the canvas white under the chart, so a PNG
// export is not transparent.
const whiteBackground = {
  id: 'whiteBackground',
  beforeDraw(c) {
    const { ctx } = c;
    ctx.save();
    ctx.globalCompositeOperation = 'destination-over';
    ctx.fillStyle = '#ffffff';
    ctx.fillRect(0, 0, c.width, c.height);
    ctx.restore();
  },
};

// STRAIGHT draws every line chart's lines as straight segments between
// their points (Chart.js tension 0, no monotone or Bézier curve), as the
// peers draw trends: a line never leaves the range of the two points it
// joins. Datasets set no tension of their own.
const STRAIGHT = { line: { tension: 0, cubicInterpolationMode: 'default' } };

// ChartView draws config with Chart.js; chartRef.current is the Chart
// (for PNG export); onPick(datasetIndex, index) is called when a point
// or bar is clicked. Lines are straight (STRAIGHT).
export function ChartView({ config, chartRef, onPick, height = 340, label = 'Result chart' }) {
  const canvas = useRef(null);
  const pick = useRef(onPick);
  pick.current = onPick;
  useEffect(() => {
    const c = new Chart(canvas.current, {
      ...config,
      plugins: [...(config.plugins || []), whiteBackground],
      options: {
        responsive: true, maintainAspectRatio: false, animation: false,
        interaction: { mode: 'nearest', intersect: true },
        elements: STRAIGHT,
        ...config.options,
        onClick: (e, els) => { if (els.length && pick.current) pick.current(els[0].datasetIndex, els[0].index); },
        onHover: (e, els) => { e.native.target.style.cursor = els.length && pick.current ? 'pointer' : 'default'; },
      },
    });
    if (chartRef) chartRef.current = c;
    return () => { c.destroy(); if (chartRef && chartRef.current === c) chartRef.current = null; };
  }, [config]);
  return html`<div class="chart-box" style=${`height:${height}px`}><canvas ref=${canvas} role="img" aria-label=${label}></canvas></div>`;
}

// savePNG downloads the chart as a PNG file.
export function savePNG(chart, name) {
  if (chart) download(chart.toBase64Image('image/png', 1), name);
}

// Warnings shows a result's warnings [{code, message, field}].
export const Warnings = ({ warnings }) => (warnings?.length
  ? html`<ul class="warnings" role="status">${warnings.map((w) => html`<li data-code=${w.code}>
      <strong>${w.code}</strong>${w.field ? html` <code>${w.field}</code>` : null} ${w.message}</li>`)}</ul>`
  : null);

export const ErrorBox = ({ err }) => html`<div class="error" role="alert">
  <strong>${err.code || 'error'}</strong>${err.field ? html`<code>${err.field}</code>` : null}<span>${err.message || String(err)}</span></div>`;

const kb = (b) => (b >= 1 << 20 ? `${(b / (1 << 20)).toFixed(1)} MiB` : `${(b / 1024).toFixed(1)} KiB`);

export const Stats = ({ st }) => (st ? html`<div class="stats">${st.wall_ms} ms · ${num(st.events_scanned)} events scanned ·
  ${st.segments_read} segments read, ${st.segments_skipped} skipped · ${kb(st.bytes_read)} read · ${kb(st.peak_memory_bytes)} query memory</div>` : null);

function Span({ span }) {
  return html`<ul class="trace"><li><span class="span-name">${span.name}${span.id !== undefined ? ' ' + span.id : ''}</span>
    <span class="span-ms"> ${span.ms} ms</span>${(span.children || []).map((c) => html`<${Span} span=${c} />`)}</li></ul>`;
}

export const Trace = ({ trace }) => (trace ? html`<details><summary>Timing</summary><${Span} span=${trace} /></details>` : null);

// Clickable marks a number the user can click to see its users.
export const Clickable = ({ onClick, title, children, attrs }) => html`<button type="button" class="num-link" title=${title || 'Show these users'}
  onClick=${onClick} ...${attrs || {}}>${children}</button>`;
