// The builder's fields shared by every analysis: range (with relative
// presets), time zone, global filters, breakdown and cohort filter.

import { html, useMemo } from '../lib/html.js';
import { useApp } from '../lib/appctx.js';
import { set, dataRange, INTERVALS } from '../lib/query.js';
import { Field, FilterList, PropertySelect, Select, splitProp } from './pickers.js';
import { CohortEditor } from './cohort.js';

// PRESETS are relative ranges (docs/analytics.md §2 "last"), which saved insights and
// dashboards keep relative.
const PRESETS = [['7d', 'Last 7 days'], ['30d', 'Last 30 days'], ['90d', 'Last 90 days'], ['12w', 'Last 12 weeks'], ['6mo', 'Last 6 months'], ['24h', 'Last 24 hours']];

// LAST_UNITS are the units of a relative range: hours end at now, the
// others are calendar units in the zone ending with today (docs/analytics.md §2).
const LAST_UNITS = [['h', 'hours'], ['d', 'days'], ['w', 'weeks'], ['mo', 'months'], ['y', 'years']];

const parseLast = (last) => {
  const m = /^(\d+)(h|d|w|mo|y)$/.exec(last || '');
  return m ? [m[1], m[2]] : [String(parseInt(last, 10) || ''), 'd'];
};

export function RangeField({ q, onChange }) {
  const { schema } = useApp();
  const r = q.range;
  const mode = !r ? 'all' : r.last ? 'last' : 'fixed';
  const fixed = r && !r.last ? r : dataRange(schema) || { from: '', to: '' };
  const setFixed = (k, v) => onChange(set(q, 'range', { ...fixed, [k]: v }));
  const [n, unit] = parseLast(r?.last);
  const setLast = (count, u) => onChange(set(q, 'range', { ...r, last: `${Math.max(1, Number(count) || 1)}${u}` }));
  // The data's last instant: "as of" it, a relative range over old data
  // is not empty.
  const dataEnd = schema?.events ? new Date(Math.floor(schema.max_time / 1000)).toISOString().replace(/\.\d+Z$/, 'Z') : '';
  return html`<${Field} title="Range">
    <div class="presets" role="group" aria-label="Date presets">
      ${PRESETS.map(([v, t]) => html`<button type="button" class=${r?.last === v ? 'chip on' : 'chip'} title=${t} aria-pressed=${r?.last === v}
        onClick=${() => onChange(set(q, 'range', { last: v }))}>${v}</button>`)}
      <button type="button" class=${mode === 'all' ? 'chip on' : 'chip'} aria-pressed=${mode === 'all'} title="All the app's data"
        onClick=${() => onChange(set(q, 'range', undefined))}>All</button>
    </div>
    ${mode === 'last' ? html`<div class="row">
        <span>Last</span>
        <input type="number" id="last-n" min="1" aria-label="Relative range length" value=${n} onInput=${(e) => setLast(e.target.value, unit)} />
        <${Select} label="Relative range unit" value=${unit} options=${LAST_UNITS} onChange=${(u) => setLast(n, u)} />
      </div>
      <p class="hint">Relative: the last ${r.last} ${unit === 'h' ? 'up to now' : 'ending with today'}, in the time zone below; a saved insight keeps it relative.${' '}
        <button type="button" class="link" onClick=${() => onChange(set(q, 'range', fixed))}>Fixed dates</button></p>` : null}
    ${mode === 'all' ? html`<p class="hint">All the app's data, by day. <button type="button" class="link" onClick=${() => onChange(set(q, 'range', fixed))}>Fixed dates</button></p>` : null}
    ${mode === 'fixed' ? html`<div class="row">
      <label>From <input type="date" id="from" value=${fixed.from.slice(0, 10)} onChange=${(e) => setFixed('from', e.target.value)} /></label>
      <label>To <input type="date" id="to" value=${fixed.to.slice(0, 10)} onChange=${(e) => setFixed('to', e.target.value)} /></label>
    </div>` : null}
    ${mode === 'last' || q.now ? html`<div class="row as-of">
        <label>As of <input id="now" aria-label="As of (now)" placeholder="now (the clock)" value=${q.now || ''}
          onChange=${(e) => onChange(set(q, 'now', e.target.value.trim() || undefined))} /></label>
        ${dataEnd && q.now !== dataEnd ? html`<button type="button" class="link" title=${dataEnd} onClick=${() => onChange(set(q, 'now', dataEnd))}>end of data</button>` : null}
        ${q.now ? html`<button type="button" class="link" onClick=${() => onChange(set(q, 'now', undefined))}>now</button>` : null}
      </div>` : null}
    <${ZonePicker} value=${q.tz} onChange=${(tz) => onChange(set(q, 'tz', tz || undefined))} />
  <//>`;
}

// IntervalRow edits a query's interval (calendar buckets in the zone)
// and, for weeks, week_start; none names an option for no interval
// (the field removed), text(interval) is an option's text.
export function IntervalRow({ q, onChange, none, text = (v) => v }) {
  const options = [...(none ? [['', none]] : []), ...INTERVALS.map((v) => [v, text(v)])];
  return html`<div class="row">
    <${Select} label="Interval" options=${options} value=${q.interval || (none ? '' : 'day')}
      onChange=${(v) => { let n = set(q, 'interval', v || undefined); if (v !== 'week') n = set(n, 'week_start', undefined); onChange(n); }} />
    ${q.interval === 'week' || q.week_start ? html`<${Select} label="Week start" options=${[['monday', 'weeks start Monday'], ['sunday', 'weeks start Sunday']]}
      value=${q.week_start || 'monday'} onChange=${(v) => onChange(set(q, 'week_start', v === 'monday' ? undefined : v))} />` : null}
  </div>`;
}

// zones groups the IANA zones the browser knows by region.
function zones() {
  const all = typeof Intl.supportedValuesOf === 'function' ? Intl.supportedValuesOf('timeZone') : [];
  const groups = {};
  for (const z of all) {
    const region = z.includes('/') ? z.slice(0, z.indexOf('/')) : 'Other';
    (groups[region] ||= []).push(z);
  }
  return groups;
}

export function ZonePicker({ value, onChange }) {
  const { schema } = useApp();
  const groups = useMemo(zones, []);
  const v = value || '';
  const known = !v || v === 'UTC' || Object.values(groups).some((g) => g.includes(v));
  return html`<label>Time zone
    <select id="tz" aria-label="Time zone" value=${v} onChange=${(e) => onChange(e.target.value)}>
      <option value="" selected=${!v}>App default (${schema?.tz || 'UTC'})</option>
      <option value="UTC" selected=${v === 'UTC'}>UTC</option>
      ${known ? null : html`<option value=${v} selected>${v}</option>`}
      ${Object.entries(groups).map(([g, zs]) => html`<optgroup label=${g}>${zs.map((z) => html`<option value=${z} selected=${z === v}>${z}</option>`)}</optgroup>`)}
    </select></label>`;
}

export function WhereField({ q, onChange }) {
  return html`<${Field} title="Filters" hint="every event must match">
    <${FilterList} filters=${q.where} label="Filter" onChange=${(w) => onChange(set(q, 'where', w))} />
  <//>`;
}

// ATTRIBUTIONS are a funnel breakdown's attributions (docs/analytics.md §11); "step"
// stands for {"step": k}.
const ATTRIBUTIONS = [['entry', 'value at entry (step 1)'], ['first_touch', 'first touch'], ['last_touch', 'last touch'], ['all_steps', 'all steps']];

// BreakdownField edits the breakdown; opts (a kind's common.breakdown)
// may narrow the sources ({sources: ['user']}) or add a funnel's
// attribution ({attribution: true}).
export function BreakdownField({ q, onChange, opts }) {
  const b = q.breakdown;
  const sources = opts?.sources || ['event', 'user'];
  const att = b?.attribution;
  const attValue = att === undefined ? 'entry' : typeof att === 'object' && att ? `step:${att.step}` : String(att);
  const steps = (q.steps || []).length;
  return html`<${Field} title="Breakdown" hint=${sources.length === 1 ? `by a ${sources[0]} property` : null}>
    <div class="row">
      <${PropertySelect} label="Breakdown property" none="None" sources=${sources} value=${b ? `${b.source || 'event'}:${b.property}` : ''}
        onChange=${(v) => {
          if (!v) return onChange(set(q, 'breakdown', undefined));
          const [source, property] = splitProp(v);
          let n = { ...b, property, source, limit: b?.limit || 10 };
          if (source !== 'event') n = set(n, 'attribution', undefined);
          onChange(set(q, 'breakdown', n));
        }} />
      <label class="narrow">Top <input type="number" id="breakdown-limit" min="1" max="10000" disabled=${!b} value=${b?.limit || ''}
        placeholder="25" onInput=${(e) => onChange(set(q, 'breakdown', set(b, 'limit', Number(e.target.value) || undefined)))} /></label>
    </div>
    ${opts?.attribution && b && (b.source || 'event') === 'event' ? html`<div class="row"><label>Attribution
      <${Select} label="Breakdown attribution" value=${attValue}
        options=${[...ATTRIBUTIONS, ...Array.from({ length: steps }, (_, k) => [`step:${k + 1}`, `value at step ${k + 1}`])]}
        onChange=${(v) => onChange(set(q, 'breakdown', set(b, 'attribution', v === 'entry' ? undefined : v.startsWith('step:') ? { step: Number(v.slice(5)) } : v)))} />
      </label></div>` : null}
  <//>`;
}

// CohortField is the query's cohort filter (docs/analytics.md §7): an inline condition
// tree or a saved cohort's name, edited in place.
export function CohortField({ q, onChange, title = 'Users in cohort', required }) {
  return html`<${Field} title=${title} hint=${required ? null : 'optional'}>
    ${q.cohort === undefined && !required
      ? html`<button type="button" class="link" onClick=${() => onChange(set(q, 'cohort', { performed: { event: '$any' } }))}>+ Cohort filter</button>`
      : html`<${CohortEditor} node=${q.cohort} path="Cohort" root
          onChange=${(c) => onChange(set(q, 'cohort', c))} />`}
  <//>`;
}
