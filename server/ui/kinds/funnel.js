// Funnel (spec §5): ordered steps with per-step filters and a conversion
// window; per step users, conversion, drop-off and times, per breakdown
// value. Every step and drop-off count opens its users.

import { html, useMemo, useState } from '../lib/html.js';
import { topEvent, useApp } from '../lib/appctx.js';
import { set, setAt } from '../lib/query.js';
import { num, pct, duration, COLORS, breakdownLabel } from '../lib/format.js';
import { Field, Select, MatcherEditor } from '../components/pickers.js';
import { ChartView, Clickable } from '../components/result.js';

function parseWindow(w) {
  const m = /^(\d+)(s|m|h|d|w|mo|y)$/.exec(w || '14d');
  return m ? [m[1], m[2]] : ['14', 'd'];
}

function Builder({ q, onChange }) {
  const { schema } = useApp();
  const steps = q.steps || [];
  const [n, unit] = parseWindow(q.window);
  const setWindow = (count, u) => onChange(set(q, 'window', `${Math.max(1, Number(count) || 1)}${u}`));
  return html`
    <${Field} title="Steps">
      ${steps.map((s, i) => html`<div class="item step" data-step=${i + 1}>
        <span class="badge">${i + 1}</span>
        <div class="grow"><${MatcherEditor} m=${s} label=${`Step ${i + 1}`} onChange=${(m) => onChange(set(q, 'steps', setAt(steps, i, m)))} /></div>
        ${steps.length > 2 ? html`<button type="button" class="icon" aria-label=${`Remove step ${i + 1}`}
          onClick=${() => onChange(set(q, 'steps', setAt(steps, i, undefined)))}>×</button>` : null}
      </div>`)}
      <button type="button" class="link" onClick=${() => onChange(set(q, 'steps', [...steps, { event: topEvent(schema, steps.length) }]))}>+ Step</button>
    <//>
    <${Field} title="Conversion window">
      <div class="row">
        <input type="number" id="window-n" min="1" aria-label="Window length" value=${n} onInput=${(e) => setWindow(e.target.value, unit)} />
        <${Select} label="Window unit" value=${unit} onChange=${(u) => setWindow(n, u)}
          options=${[['s', 'seconds'], ['m', 'minutes'], ['h', 'hours'], ['d', 'days'], ['w', 'weeks'], ['mo', 'months (30 days)']]} />
      </div>
    <//>`;
}

// stepLabels draws each bar's value above it, only where it fits.
const stepLabels = {
  id: 'stepLabels',
  afterDatasetsDraw(c) {
    const { ctx } = c;
    c.data.datasets.forEach((ds, i) => {
      const meta = c.getDatasetMeta(i);
      if (meta.hidden || !ds.barText) return;
      meta.data.forEach((bar, j) => {
        if (bar.width < ctx.measureText(ds.barText[j]).width + 6) return;
        ctx.save();
        ctx.font = '600 11px system-ui, sans-serif';
        ctx.fillStyle = '#111827';
        ctx.textAlign = 'center';
        ctx.textBaseline = 'bottom';
        ctx.fillText(ds.barText[j], bar.x, bar.y - 3);
        ctx.restore();
      });
    });
  },
};

function StepTable({ q, steps, value, drill }) {
  const bv = value === undefined ? {} : { breakdown_value: value };
  const title = value === undefined ? 'All users' : breakdownLabel(q, value);
  return html`<table class="grid" data-kind="funnel" data-breakdown=${value ?? null}>
    <caption>${title}</caption>
    <thead><tr><th>Step</th><th>Event</th><th class="num">Users</th><th class="num">Conversion</th><th class="num">From previous</th>
      <th class="num">Dropped</th><th class="num">Avg time</th><th class="num">Median time</th></tr></thead>
    <tbody>${steps.map((s, i) => {
      const dropped = s.users - (steps[i + 1]?.users ?? 0);
      return html`<tr data-step=${s.step}>
        <td>${s.step}</td><td>${s.event ?? s.label}</td>
        <td class="num" data-col="users">${drill ? html`<${Clickable} onClick=${() => drill({ step: s.step, ...bv }, `${title}, reached step ${s.step}`)}>${num(s.users)}<//>` : num(s.users)}</td>
        <td class="num" data-col="conversion"><span class="bar" style=${`--w:${(100 * s.conversion).toFixed(1)}%`}></span><span class="v">${pct(s.conversion)}</span></td>
        <td class="num" data-col="conversion_from_previous">${pct(s.conversion_from_previous)}</td>
        <td class="num" data-col="dropped">${i === steps.length - 1 ? '–' : drill
          ? html`<${Clickable} onClick=${() => drill({ step: s.step, dropped: true, ...bv }, `${title}, dropped after step ${s.step}`)}>${num(dropped)}<//>` : num(dropped)}</td>
        <td class="num" data-col="avg_seconds">${duration(s.avg_seconds)}</td>
        <td class="num" data-col="median_seconds">${duration(s.median_seconds)}</td></tr>`;
    })}</tbody></table>`;
}

function Result({ q, res, drill, chartRef, compact }) {
  const groups = res.breakdown?.length
    ? res.breakdown.map((b) => ({ value: b.value, name: breakdownLabel(q, b.value), steps: b.steps }))
    : [{ value: undefined, name: 'All users', steps: res.steps }];
  // With a breakdown, conversion (each group against its own step 1)
  // keeps small groups readable; users is the absolute scale, where a
  // minimum bar length keeps them visible.
  const [scale, setScale] = useState(groups.length > 1 ? 'conversion' : 'users');
  const rel = scale === 'conversion';
  const config = useMemo(() => {
    const datasets = groups.map((g, i) => ({
      label: g.name,
      data: g.steps.map((s) => (rel ? 100 * s.conversion : s.users)),
      backgroundColor: COLORS[i % COLORS.length] + 'cc', borderColor: COLORS[i % COLORS.length], borderWidth: 1, borderRadius: 3,
      minBarLength: 3, stack: groups.length > 1 ? `g${i}` : 'all',
      barText: groups.length <= 4 ? g.steps.map((s) => (rel ? pct(s.conversion) : num(s.users))) : null,
      steps: g.steps, value: g.value,
    }));
    if (groups.length === 1) {
      // The users who dropped off before each step, stacked on the bar.
      const st = groups[0].steps;
      datasets.push({ label: 'Dropped off', data: st.map((s, k) => (k === 0 ? 0 : rel ? 100 * (st[k - 1].conversion - s.conversion) : st[k - 1].users - s.users)),
        backgroundColor: '#e5e7eb', borderColor: '#d1d5db', borderWidth: 1, stack: 'all', dropped: true, steps: st });
    }
    return {
      type: 'bar',
      data: { labels: res.steps.map((s) => `${s.step}. ${s.event ?? s.label}`), datasets },
      options: {
        scales: { x: { stacked: true }, y: { stacked: true, beginAtZero: true, grace: '10%', max: rel ? 110 : undefined,
          title: { display: true, text: rel ? 'conversion from step 1 (%)' : 'users' }, ticks: rel ? { callback: (v) => (v <= 100 ? v + '%' : '') } : {} } },
        plugins: {
          legend: { display: true, position: 'bottom', labels: { boxWidth: 12 } },
          tooltip: { callbacks: { label: (ctx) => {
            const s = ctx.dataset.steps[ctx.dataIndex];
            if (ctx.dataset.dropped) return `dropped off before step ${s.step}: ${num(ctx.dataset.steps[ctx.dataIndex - 1]?.users - s.users)}`;
            return `${ctx.dataset.label}: ${num(s.users)} users, ${pct(s.conversion)} of step 1, ${pct(s.conversion_from_previous)} from previous`;
          } } },
        },
      },
      plugins: [stepLabels],
    };
  }, [res, scale]);
  const pick = (d, i) => {
    const ds = config.data.datasets[d];
    if (ds.dropped) {
      const v = groups[0].value;
      if (i > 0) drill({ step: i, dropped: true, ...(v !== undefined ? { breakdown_value: v } : {}) }, `dropped after step ${i}`);
      return;
    }
    drill({ step: i + 1, ...(ds.value !== undefined ? { breakdown_value: ds.value } : {}) }, `${ds.label}, reached step ${i + 1}`);
  };
  return html`
    ${compact ? null : html`<div class="toolbar" role="group" aria-label="Funnel scale">
      <button type="button" class=${rel ? 'chip on' : 'chip'} aria-pressed=${rel} onClick=${() => setScale('conversion')}>Conversion %</button>
      <button type="button" class=${rel ? 'chip' : 'chip on'} aria-pressed=${!rel} onClick=${() => setScale('users')}>Users</button>
    </div>`}
    <${ChartView} config=${config} chartRef=${chartRef} height=${compact ? 220 : 340} onPick=${drill ? pick : null} />
    ${compact ? null : html`
      ${res.breakdown?.length ? html`<${StepTable} q=${q} steps=${res.steps} drill=${drill} />` : null}
      ${groups.map((g) => html`<${StepTable} q=${q} steps=${g.steps} value=${g.value} drill=${drill} />`)}
      <p class="note">Conversion window ${duration(res.window_seconds)}. Times are from the previous step, over the users who reached the step.
        Dropped: users whose furthest step is this one. Click a number for its users.</p>`}`;
}

export default {
  kind: 'funnel', label: 'Funnel',
  fields: ['steps', 'window', 'order', 'exclusions', 'view', 'from_step', 'to_step', 'bins', 'interval'],
  common: { where: true, breakdown: true, cohort: true },
  defaults: (schema) => ({ steps: [{ event: topEvent(schema, 0) }, { event: topEvent(schema, 1) }], window: '14d' }),
  Builder, Result,
};
