// Attribution (docs/analytics.md §10): which touchpoint's channel earned each
// conversion, by a model chosen per question (a control over the result
// too), with the conversions' value and the subsequent events they led
// to; a bar per channel (and breakdown value), conversions by bucket, and
// the table. A channel's user count opens its users (list {channel}).

import { html, useMemo } from '../lib/html.js';
import { eventNames, props, useApp } from '../lib/appctx.js';
import { set, setAt } from '../lib/query.js';
import { num, pct, bucketLabel, COLORS, breakdownLabel } from '../lib/format.js';
import { Field, Select, MatcherEditor, PropertySelect, splitProp } from '../components/pickers.js';
import { ChartView, Clickable } from '../components/result.js';
import { IntervalRow } from '../components/common.js';

export const MODELS = [['last_touch', 'Last touch'], ['first_touch', 'First touch'], ['linear', 'Linear'], ['position_based', 'Position based'], ['time_decay', 'Time decay']];

const DURATION_UNITS = [['h', 'hours'], ['d', 'days'], ['w', 'weeks'], ['mo', 'months (30 days)']];

// DurationInput edits a duration such as "7d" as a number and a unit.
function DurationInput({ value, label, onChange, fallback }) {
  const m = /^(\d+)(s|m|h|d|w|mo|y)$/.exec(value || fallback);
  const [n, u] = m ? [m[1], m[2]] : ['7', 'd'];
  const put = (count, unit) => onChange(`${Math.max(1, Number(count) || 1)}${unit}`);
  return html`<span class="duration"><input type="number" min="1" aria-label=${`${label} length`} value=${n} onInput=${(e) => put(e.target.value, u)} />
    <${Select} label=${`${label} unit`} value=${u} options=${DURATION_UNITS} onChange=${(x) => put(n, x)} /></span>`;
}

// setModel returns q with model m; a half-life belongs to time_decay.
export const setModel = (q, m) => {
  const n = set(q, 'model', m === 'last_touch' && q.model === undefined ? undefined : m);
  return m === 'time_decay' ? n : set(n, 'half_life', undefined);
};

const propValue = (name) => (name ? `event:${name}` : '');

function Builder({ q, onChange }) {
  const tps = q.touchpoints || [];
  const setTp = (i, t) => onChange(set(q, 'touchpoints', setAt(tps, i, t)));
  const move = (i, d) => {
    const l = [...tps];
    [l[i], l[i + d]] = [l[i + d], l[i]];
    onChange(set(q, 'touchpoints', l));
  };
  const { schema } = useApp();
  const sub = q.subsequent;
  return html`
    <${Field} title="Conversion">
      <${MatcherEditor} m=${q.conversion} label="Conversion" onChange=${(m) => onChange(set(q, 'conversion', m))} />
      <div class="row">
        <${Select} label="Conversions counted" options=${[['all', 'every conversion'], ['first', 'each user\'s first conversion']]} value=${q.conversions || 'all'}
          onChange=${(v) => onChange(set(q, 'conversions', v === 'all' ? undefined : v))} />
        <${PropertySelect} label="Conversion value" none="no value" sources=${['event']} numeric value=${propValue(q.value)}
          onChange=${(v) => onChange(set(q, 'value', splitProp(v)[1] || undefined))} />
      </div>
    <//>
    <${Field} title="Touchpoints" hint="highest priority first">
      ${tps.map((t, i) => html`<div class="item touchpoint" data-touchpoint=${i + 1}>
        <span class="badge">${i + 1}</span>
        <div class="grow">
          <${MatcherEditor} m=${t} label=${`Touchpoint ${i + 1}`} any=${false} onChange=${(m) => setTp(i, set({ ...t, event: m.event }, 'where', m.where))} />
          <div class="row"><span>lookback</span><${DurationInput} value=${t.lookback} fallback="7d" label=${`Touchpoint ${i + 1} lookback`}
            onChange=${(v) => setTp(i, { ...t, lookback: v })} /></div>
        </div>
        <div class="stack">
          ${i > 0 ? html`<button type="button" class="icon" aria-label=${`Raise touchpoint ${i + 1}`} title="higher priority" onClick=${() => move(i, -1)}>↑</button>` : null}
          ${i < tps.length - 1 ? html`<button type="button" class="icon" aria-label=${`Lower touchpoint ${i + 1}`} title="lower priority" onClick=${() => move(i, 1)}>↓</button>` : null}
          ${tps.length > 1 ? html`<button type="button" class="icon" aria-label=${`Remove touchpoint ${i + 1}`} onClick=${() => onChange(set(q, 'touchpoints', setAt(tps, i, undefined)))}>×</button>` : null}
        </div>
      </div>`)}
      <button type="button" class="link" onClick=${() => onChange(set(q, 'touchpoints', [...tps, { event: eventNames(schema).find((e) => !tps.some((t) => t.event === e)) || eventNames(schema)[0], lookback: '7d' }]))}>+ Touchpoint</button>
      <label>Channel (the touchpoint property credited)
        <${PropertySelect} label="Channel property" sources=${['event']} value=${propValue(q.channel)} onChange=${(v) => onChange(set(q, 'channel', splitProp(v)[1] || undefined))} /></label>
    <//>
    <${Field} title="Model">
      <div class="row"><${Select} label="Attribution model" options=${MODELS} value=${q.model || 'last_touch'} onChange=${(m) => onChange(setModel(q, m))} /></div>
      ${q.model === 'time_decay' ? html`<div class="row"><span>half-life</span>
        <${DurationInput} value=${q.half_life} fallback="7d" label="Half-life" onChange=${(v) => onChange(set(q, 'half_life', v))} /></div>` : null}
    <//>
    <${Field} title="Subsequent events" hint="later events credited through the conversion">
      ${sub ? html`<div class="item"><div class="grow">
          <${MatcherEditor} m=${sub} label="Subsequent" any=${false} onChange=${(m) => onChange(set(q, 'subsequent', set({ ...sub, event: m.event }, 'where', m.where)))} />
          <div class="row"><span>within</span><${DurationInput} value=${sub.window} fallback="30d" label="Subsequent window"
            onChange=${(v) => onChange(set(q, 'subsequent', { ...sub, window: v }))} /></div>
          <${PropertySelect} label="Subsequent value" none="no value" sources=${['event']} numeric value=${propValue(sub.value)}
            onChange=${(v) => onChange(set(q, 'subsequent', set(sub, 'value', splitProp(v)[1] || undefined)))} />
        </div><button type="button" class="icon" aria-label="Remove subsequent events" onClick=${() => onChange(set(q, 'subsequent', undefined))}>×</button></div>`
      : html`<button type="button" class="link" onClick=${() => onChange(set(q, 'subsequent', { event: eventNames(schema).find((e) => /purchase|order|revenue/.test(e)) || eventNames(schema)[0], window: '30d' }))}>+ Subsequent events</button>`}
    <//>
    <${Field} title="Interval"><${IntervalRow} q=${q} onChange=${onChange} none="no buckets" text=${(v) => `by ${v}`} /><//>`;
}

// channelName labels a channel row: "social", "social · platform = ios".
const channelName = (q, c) => {
  const bd = breakdownLabel(q, c.breakdown_value);
  return `${c.channel}${bd ? ' · ' + bd : ''}`;
};

function Result({ q, res, drill, chartRef, compact, onQuery }) {
  const chans = res.channels || [];
  const channels = [...new Set(chans.map((c) => c.channel))];
  const values = [...new Set(chans.map((c) => c.breakdown_value))];
  const byKey = new Map(chans.map((c) => [`${c.channel}\u0000${c.breakdown_value}`, c]));
  const hasValue = res.total.value !== 0 || !!q.value;
  const sub = !!res.total.subsequent;
  const config = useMemo(() => ({
    type: 'bar',
    data: {
      labels: channels,
      // One color per channel (as in the chart by bucket), or per
      // breakdown value.
      datasets: values.map((v, i) => {
        const color = values.length > 1 ? COLORS[i % COLORS.length] : channels.map((_, k) => COLORS[k % COLORS.length]);
        return {
          label: v === null || v === undefined ? 'conversions' : breakdownLabel(q, v),
          data: channels.map((ch) => byKey.get(`${ch}\u0000${v}`)?.conversions ?? 0),
          backgroundColor: Array.isArray(color) ? color.map((c) => c + 'cc') : color + 'cc', borderColor: color, borderWidth: 1, borderRadius: 2,
        };
      }),
    },
    options: {
      indexAxis: 'y',
      scales: { x: { stacked: true, beginAtZero: true, title: { display: true, text: `conversions credited (${MODELS.find(([m]) => m === res.model)?.[1] || res.model})` } },
        y: { stacked: true } },
      plugins: { legend: { display: values.length > 1, position: 'bottom', labels: { boxWidth: 12 } },
        tooltip: { callbacks: { label: (ctx) => `${ctx.dataset.label}: ${num(ctx.parsed.x)} conversions (${pct(ctx.parsed.x / (res.total.conversions || 1))})` } } },
    },
  }), [res]);
  // Conversions by bucket and channel (breakdown values summed).
  const buckets = chans[0]?.buckets || [];
  const timeConfig = useMemo(() => (buckets.length ? {
    type: 'bar',
    data: {
      labels: buckets.map((b) => bucketLabel(b.start, res.interval === 'hour')),
      datasets: channels.map((ch, i) => ({
        label: ch, stack: 'c', backgroundColor: COLORS[i % COLORS.length] + 'cc', borderColor: COLORS[i % COLORS.length], borderWidth: 1,
        data: buckets.map((_, k) => chans.filter((c) => c.channel === ch).reduce((a, c) => a + (c.buckets?.[k]?.conversions || 0), 0)),
      })),
    },
    options: { scales: { x: { stacked: true }, y: { stacked: true, beginAtZero: true, title: { display: true, text: `conversions by ${res.interval}` } } },
      plugins: { legend: { position: 'bottom', labels: { boxWidth: 12 } } } },
  } : null), [res]);
  const pick = (c) => drill({ channel: c.channel, ...(c.breakdown_value !== null && c.breakdown_value !== undefined ? { breakdown_value: c.breakdown_value } : {}) },
    `credited to ${channelName(q, c)}`);
  const height = Math.max(compact ? 180 : 220, channels.length * (values.length > 1 ? 34 : 28) + 80);
  return html`
    ${compact || !onQuery ? null : html`<div class="toolbar" role="group" aria-label="Attribution model switch">
      ${MODELS.map(([m, t]) => html`<button type="button" class=${m === res.model ? 'chip on' : 'chip'} aria-pressed=${m === res.model} data-model=${m}
        onClick=${() => m !== res.model && onQuery(setModel(q, m))}>${t}</button>`)}
    </div>`}
    <${ChartView} config=${config} chartRef=${chartRef} height=${compact ? 220 : height} label="Conversions by channel"
      onPick=${drill ? (d, i) => { const c = byKey.get(`${channels[i]}\u0000${values[d]}`); if (c) pick(c); } : null} />
    ${timeConfig && !compact ? html`<${ChartView} config=${timeConfig} height=${280} label="Conversions by bucket and channel" />` : null}
    ${compact ? null : html`<div class="scroll"><table class="grid" data-kind="attribution">
      <thead><tr><th>Channel</th>${values.length > 1 || values[0] != null ? html`<th>${q.breakdown?.property || 'Breakdown'}</th>` : null}
        <th class="num">Conversions</th><th class="num">Share</th><th class="num">Users</th>${hasValue ? html`<th class="num">Value</th>` : null}
        ${sub ? html`<th class="num">Subsequent events</th><th class="num">Subsequent value</th>` : null}</tr></thead>
      <tbody>
        ${chans.map((c, i) => html`<tr data-channel=${c.channel} data-row=${i}>
          <td>${c.channel}</td>${values.length > 1 || values[0] != null ? html`<td>${c.breakdown_value}</td>` : null}
          <td class="num" data-col="conversions">${num(c.conversions)}</td>
          <td class="num" data-col="share">${pct(c.conversions / (res.total.conversions || 1))}</td>
          <td class="num" data-col="users">${drill && c.users > 0 ? html`<${Clickable} onClick=${() => pick(c)}>${num(c.users)}<//>` : num(c.users)}</td>
          ${hasValue ? html`<td class="num" data-col="value">${num(c.value)}</td>` : null}
          ${sub ? html`<td class="num" data-col="subsequent_events">${num(c.subsequent?.events ?? 0)}</td><td class="num" data-col="subsequent_value">${num(c.subsequent?.value ?? 0)}</td>` : null}
        </tr>`)}
        <tr class="total"><td>Total</td>${values.length > 1 || values[0] != null ? html`<td></td>` : null}
          <td class="num" data-col="conversions">${num(res.total.conversions)}</td><td class="num">100.0%</td><td class="num">${num(res.total.users)}</td>
          ${hasValue ? html`<td class="num">${num(res.total.value)}</td>` : null}
          ${sub ? html`<td class="num">${num(res.total.subsequent.events)}</td><td class="num">${num(res.total.subsequent.value)}</td>` : null}</tr>
      </tbody></table></div>
      <p class="note">Conversions are the sum of each conversion's shares (${MODELS.find(([m]) => m === res.model)?.[1] || res.model}); users are those with a positive share,
        so a user credited to several channels counts in each. "(unattributed)": no eligible touchpoint within its lookback. Click a user count or a bar for its users.</p>`}`;
}

// defaults guess a conversion, touchpoints and a channel from the app's
// event and property names (the generator's install, ad_click and
// ad_impression, channel), else its most frequent events.
function defaults(schema) {
  const names = eventNames(schema);
  const conversion = names.find((e) => /install|sign_?up|purchase/.test(e)) || names[0] || '$any';
  const tps = names.filter((e) => /click|impression|touch|campaign/.test(e) && e !== conversion).slice(0, 2);
  const touchpoints = (tps.length ? tps : names.filter((e) => e !== conversion).slice(0, 1)).map((e, i) => ({ event: e, lookback: i ? '1d' : '7d' }));
  const ep = props(schema, 'event');
  const channel = (ep.find((p) => /channel|campaign|source|media/.test(p.name)) || ep.find((p) => p.type === 'string') || ep[0])?.name || '';
  return { conversion: { event: conversion }, touchpoints, channel, model: 'last_touch' };
}

export default {
  kind: 'attribution', label: 'Attribution',
  fields: ['conversion', 'conversions', 'value', 'touchpoints', 'channel', 'model', 'half_life', 'subsequent', 'interval', 'week_start'],
  common: { where: true, breakdown: true, cohort: true },
  interval: (q) => q.interval || null,
  defaults, Builder, Result,
};
