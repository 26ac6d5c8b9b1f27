// Funnel (docs/analytics.md §5, §11): steps with per-step filters, a conversion window,
// an order (ordered, strict, any) and exclusions; viewed as steps (users,
// conversion, drop-off and times per step), conversion over time or a
// time-to-convert histogram, per breakdown value with its attribution.
// Every count opens its users.

import { html, useMemo, useState } from '../lib/html.js';
import { topEvent, useApp } from '../lib/appctx.js';
import { set, setAt } from '../lib/query.js';
import { num, pct, duration, COLORS, breakdownLabel } from '../lib/format.js';
import { Field, Select, MatcherEditor } from '../components/pickers.js';
import { ChartView, Clickable } from '../components/result.js';
import { TrendsResult, TimesResult } from './funnel-views.js';
import { IntervalRow } from '../components/common.js';

function parseWindow(w) {
  const m = /^(\d+)(s|m|h|d|w|mo|y)$/.exec(w || '14d');
  return m ? [m[1], m[2]] : ['14', 'd'];
}

const ORDERS = [['ordered', 'in order (other events may come between)'], ['strict', 'strictly in order (nothing between)'], ['unordered', 'in any order']];

export const VIEWS = [['steps', 'Steps'], ['trends', 'Conversion over time'], ['time_to_convert', 'Time to convert']];

// VIEW_FIELDS are the fields only some views take (the others reject
// them).
const VIEW_FIELDS = { from_step: ['trends', 'time_to_convert'], to_step: ['trends', 'time_to_convert'], bins: ['time_to_convert'],
  interval: ['trends'], week_start: ['trends'] };

// setView returns q in view v, without the fields v does not take.
export function setView(q, v) {
  let n = set(q, 'view', v === 'steps' ? undefined : v);
  for (const [f, views] of Object.entries(VIEW_FIELDS)) if (!views.includes(v)) n = set(n, f, undefined);
  return n;
}

// withoutStep removes step i and the step numbers that no longer exist.
function withoutStep(q, i) {
  const steps = setAt(q.steps, i, undefined);
  const n = steps.length;
  let r = set(q, 'steps', steps);
  if (q.to_step > n || q.from_step >= (q.to_step || n)) r = set(set(r, 'from_step', undefined), 'to_step', undefined);
  if (q.exclusions) r = set(r, 'exclusions', q.exclusions.map((x) => (x.to_step > n ? set(set(x, 'to_step', undefined), 'from_step', x.from_step < n ? x.from_step : undefined) : x)));
  const att = q.breakdown?.attribution;
  if (att?.step > n) r = set(r, 'breakdown', set(q.breakdown, 'attribution', undefined));
  return r;
}

// stepOptions are the step numbers lo..hi as select options.
const stepOptions = (lo, hi) => Array.from({ length: Math.max(0, hi - lo + 1) }, (_, k) => [String(lo + k), `step ${lo + k}`]);

function Builder({ q, onChange }) {
  const { schema } = useApp();
  const steps = q.steps || [];
  const n = steps.length;
  const [wn, unit] = parseWindow(q.window);
  const setWindow = (count, u) => onChange(set(q, 'window', `${Math.max(1, Number(count) || 1)}${u}`));
  const view = q.view || 'steps';
  const exclusions = q.exclusions || [];
  const setExclusion = (i, x) => {
    const l = setAt(exclusions, i, x);
    onChange(set(q, 'exclusions', l.length ? l : undefined));
  };
  const unordered = q.order === 'unordered';
  return html`
    <${Field} title="Steps">
      ${steps.map((s, i) => html`<div class="item step" data-step=${i + 1}>
        <span class="badge">${i + 1}</span>
        <div class="grow"><${MatcherEditor} m=${s} label=${`Step ${i + 1}`} onChange=${(m) => onChange(set(q, 'steps', setAt(steps, i, m)))} /></div>
        ${steps.length > 2 ? html`<button type="button" class="icon" aria-label=${`Remove step ${i + 1}`}
          onClick=${() => onChange(withoutStep(q, i))}>×</button>` : null}
      </div>`)}
      <button type="button" class="link" onClick=${() => onChange(set(q, 'steps', [...steps, { event: topEvent(schema, steps.length) }]))}>+ Step</button>
    <//>
    <${Field} title="Conversion window">
      <div class="row">
        <input type="number" id="window-n" min="1" aria-label="Window length" value=${wn} onInput=${(e) => setWindow(e.target.value, unit)} />
        <${Select} label="Window unit" value=${unit} onChange=${(u) => setWindow(wn, u)}
          options=${[['s', 'seconds'], ['m', 'minutes'], ['h', 'hours'], ['d', 'days'], ['w', 'weeks'], ['mo', 'months (30 days)'], ['y', 'years (365 days)']]} />
      </div>
    <//>
    <${Field} title="Order">
      <${Select} label="Step order" options=${ORDERS} value=${q.order || 'ordered'}
        onChange=${(v) => {
          let r = set(q, 'order', v === 'ordered' ? undefined : v);
          // Unordered funnels take exclusions over the whole funnel only.
          if (v === 'unordered' && q.exclusions) r = set(r, 'exclusions', q.exclusions.map((x) => set(set(x, 'from_step', undefined), 'to_step', undefined)));
          onChange(r);
        }} />
    <//>
    <${Field} title="Exclusions" hint="attempts with such an event between the steps are dropped">
      ${exclusions.map((x, i) => html`<div class="item exclusion" data-exclusion=${i + 1}>
        <span class="badge x">✕</span>
        <div class="grow">
          <${MatcherEditor} m=${x} label=${`Exclusion ${i + 1}`} any=${false} onChange=${(m) => setExclusion(i, { ...x, ...m, where: m.where })} />
          ${unordered ? html`<p class="hint">over the whole funnel (any order)</p>` : html`<div class="row"><span>between</span>
            <${Select} label=${`Exclusion ${i + 1} from step`} options=${stepOptions(1, n - 1)} value=${String(x.from_step || 1)}
              onChange=${(v) => setExclusion(i, { ...x, from_step: Number(v) })} />
            <span>and</span>
            <${Select} label=${`Exclusion ${i + 1} to step`} options=${stepOptions(2, n)} value=${String(x.to_step || n)}
              onChange=${(v) => setExclusion(i, { ...x, to_step: Number(v) })} /></div>`}
        </div>
        <button type="button" class="icon" aria-label=${`Remove exclusion ${i + 1}`} onClick=${() => setExclusion(i, undefined)}>×</button>
      </div>`)}
      <button type="button" class="link" onClick=${() => onChange(set(q, 'exclusions', [...exclusions, { event: topEvent(schema, n) }]))}>+ Exclusion</button>
    <//>
    <${Field} title="View">
      <${Select} label="Funnel view" options=${VIEWS} value=${view} onChange=${(v) => onChange(setView(q, v))} />
      ${view !== 'steps' ? html`<div class="row"><span>from</span>
          <${Select} label="View from step" options=${stepOptions(1, n - 1)} value=${String(q.from_step || 1)}
            onChange=${(v) => onChange(set(q, 'from_step', Number(v)))} />
          <span>to</span>
          <${Select} label="View to step" options=${stepOptions(2, n)} value=${String(q.to_step || n)}
            onChange=${(v) => onChange(set(q, 'to_step', Number(v)))} /></div>` : null}
      ${view === 'trends' ? html`<${IntervalRow} q=${q} onChange=${onChange} text=${(v) => `by ${v} of step 1`} />` : null}
      ${view === 'time_to_convert' ? html`<div class="row"><label class="narrow">Bins
          <input type="number" id="bins" min="1" max="90" placeholder="auto" value=${q.bins || ''}
            onInput=${(e) => onChange(set(q, 'bins', Number(e.target.value) || undefined))} /></label>
          <span class="hint">auto: ∛users, at most 60</span></div>` : null}
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

function StepsResult({ q, res, drill, chartRef, compact }) {
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
      data: { labels: res.steps.map((s) => (s.event ? `${s.step}. ${s.event}` : s.label)), datasets },
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
      <p class="note">Conversion window ${duration(res.window_seconds)}${orderNote(res)}${exclusionNote(q)}. Times are from the previous step, over the users who reached the step.
        Dropped: users whose furthest step is this one. Click a number for its users.</p>`}`;
}

const orderNote = (res) => (res.order === 'strict' ? ', strict order: any other event between two steps ends the attempt'
  : res.order === 'unordered' ? ', any order: step k is k distinct steps within one window' : '');

const exclusionNote = (q) => (q.exclusions?.length ? `, excluding attempts with ${q.exclusions.map((x) => x.event).join(', ')} between steps` : '');

// Result shows a funnel in its view, with a switch between the views
// (which re-runs the query in the other view).
function Result({ q, res, drill, chartRef, compact, onQuery }) {
  const view = res.view || 'steps';
  const View = view === 'trends' ? TrendsResult : view === 'time_to_convert' ? TimesResult : StepsResult;
  return html`
    ${compact || !onQuery ? null : html`<div class="toolbar" role="group" aria-label="Funnel view switch">
      ${VIEWS.map(([v, t]) => html`<button type="button" class=${v === view ? 'chip on' : 'chip'} aria-pressed=${v === view} data-view=${v}
        onClick=${() => v !== view && onQuery(setView(q, v))}>${t}</button>`)}
    </div>`}
    <${View} q=${q} res=${res} drill=${drill} chartRef=${chartRef} compact=${compact} />`;
}

export default {
  kind: 'funnel', label: 'Funnel',
  fields: ['steps', 'window', 'order', 'exclusions', 'view', 'from_step', 'to_step', 'bins', 'interval', 'week_start'],
  common: { where: true, breakdown: { attribution: true }, cohort: true },
  interval: (q) => (q.view === 'trends' ? q.interval || 'day' : null),
  defaults: (schema) => ({ steps: [{ event: topEvent(schema, 0) }, { event: topEvent(schema, 1) }], window: '14d' }),
  Builder, Result,
};
