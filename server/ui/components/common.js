// The builder's fields shared by every analysis: range (with relative
// presets), time zone, global filters, breakdown and cohort filter.

import { html, useMemo } from '../lib/html.js';
import { useApp } from '../lib/appctx.js';
import { set, dataRange } from '../lib/query.js';
import { Field, FilterList, PropertySelect, splitProp } from './pickers.js';
import { CohortEditor } from './cohort.js';

// PRESETS are relative ranges (spec §2 "last"), which saved insights and
// dashboards keep relative.
const PRESETS = [['7d', 'Last 7 days'], ['30d', 'Last 30 days'], ['90d', 'Last 90 days'], ['12w', 'Last 12 weeks'], ['6mo', 'Last 6 months'], ['24h', 'Last 24 hours']];

export function RangeField({ q, onChange }) {
  const { schema } = useApp();
  const r = q.range;
  const mode = !r ? 'all' : r.last ? 'last' : 'fixed';
  const fixed = r && !r.last ? r : dataRange(schema) || { from: '', to: '' };
  const setFixed = (k, v) => onChange(set(q, 'range', { ...fixed, [k]: v }));
  return html`<${Field} title="Range">
    <div class="presets" role="group" aria-label="Date presets">
      ${PRESETS.map(([v, t]) => html`<button type="button" class=${r?.last === v ? 'chip on' : 'chip'} title=${t} aria-pressed=${r?.last === v}
        onClick=${() => onChange(set(q, 'range', { last: v }))}>${v}</button>`)}
      <button type="button" class=${mode === 'all' ? 'chip on' : 'chip'} aria-pressed=${mode === 'all'} title="All the app's data"
        onClick=${() => onChange(set(q, 'range', undefined))}>All</button>
    </div>
    ${mode === 'last' ? html`<p class="hint">Relative: the last ${r.last}, up to now, in the time zone below.
      <button type="button" class="link" onClick=${() => onChange(set(q, 'range', fixed))}>Fixed dates</button></p>` : null}
    ${mode === 'all' ? html`<p class="hint">All the app's data, by day. <button type="button" class="link" onClick=${() => onChange(set(q, 'range', fixed))}>Fixed dates</button></p>` : null}
    ${mode === 'fixed' ? html`<div class="row">
      <label>From <input type="date" id="from" value=${fixed.from.slice(0, 10)} onChange=${(e) => setFixed('from', e.target.value)} /></label>
      <label>To <input type="date" id="to" value=${fixed.to.slice(0, 10)} onChange=${(e) => setFixed('to', e.target.value)} /></label>
    </div>` : null}
    <${ZonePicker} value=${q.tz} onChange=${(tz) => onChange(set(q, 'tz', tz || undefined))} />
  <//>`;
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

export function BreakdownField({ q, onChange }) {
  const b = q.breakdown;
  return html`<${Field} title="Breakdown">
    <div class="row">
      <${PropertySelect} label="Breakdown property" none="None" value=${b ? `${b.source || 'event'}:${b.property}` : ''}
        onChange=${(v) => {
          if (!v) return onChange(set(q, 'breakdown', undefined));
          const [source, property] = splitProp(v);
          onChange(set(q, 'breakdown', { ...b, property, source, limit: b?.limit || 10 }));
        }} />
      <label class="narrow">Top <input type="number" id="breakdown-limit" min="1" max="10000" disabled=${!b} value=${b?.limit || ''}
        placeholder="25" onInput=${(e) => onChange(set(q, 'breakdown', set(b, 'limit', Number(e.target.value) || undefined)))} /></label>
    </div>
  <//>`;
}

// CohortField is the query's cohort filter (spec §7): an inline condition
// tree or a saved cohort's name, edited in place.
export function CohortField({ q, onChange, title = 'Users in cohort', required }) {
  return html`<${Field} title=${title} hint=${required ? null : 'optional'}>
    ${q.cohort === undefined && !required
      ? html`<button type="button" class="link" onClick=${() => onChange(set(q, 'cohort', { performed: { event: '$any' } }))}>+ Cohort filter</button>`
      : html`<${CohortEditor} node=${q.cohort} path="Cohort" root
          onChange=${(c) => onChange(set(q, 'cohort', c))} />`}
  <//>`;
}
