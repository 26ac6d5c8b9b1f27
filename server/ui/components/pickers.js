// Form controls fed by the app's schema: selects of events and
// properties, filter lists (docs/analytics.md §3) and event matchers.

import { html } from '../lib/html.js';
import { useApp, props, propType } from '../lib/appctx.js';
import { ANY, set, setAt } from '../lib/query.js';
import { num } from '../lib/format.js';

// Select is a <select> of [value, text] options; a value not among them
// is shown as itself, so a link's value is never silently replaced.
export function Select({ options, value, onChange, label, id, class: cls }) {
  const opts = options.some(([v]) => v === value) || value === undefined ? options : [...options, [value, `${value}`]];
  return html`<select aria-label=${label} id=${id} class=${cls} value=${value} onChange=${(e) => onChange(e.target.value)}>
    ${opts.map(([v, t]) => html`<option value=${v} selected=${v === value}>${t}</option>`)}
  </select>`;
}

export function EventSelect({ value, onChange, label, any = true }) {
  const { schema } = useApp();
  const names = schema?.event_names || [];
  const v = value || ANY;
  const known = v === ANY || names.some((e) => e.name === v);
  return html`<select aria-label=${label} value=${v} onChange=${(e) => onChange(e.target.value)}>
    ${any ? html`<option value=${ANY} selected=${v === ANY}>Any event</option>` : null}
    ${names.map((e) => html`<option value=${e.name} selected=${e.name === v}>${e.name} (${num(e.count)})</option>`)}
    ${known ? null : html`<option value=${v} selected>${v} (not in this app)</option>`}
  </select>`;
}

// PropertySelect picks an event or user property; its value is
// "source:name" (source event or user).
export function PropertySelect({ value, onChange, label, none, sources = ['event', 'user'], numeric }) {
  const { schema } = useApp();
  const group = (title, source) => html`<optgroup label=${title}>
    ${props(schema, source).filter((p) => !numeric || p.type === 'int' || p.type === 'float')
      .map((p) => html`<option value=${`${source}:${p.name}`} selected=${value === `${source}:${p.name}`}>${p.name} (${p.type})</option>`)}
  </optgroup>`;
  const [src, name] = splitProp(value);
  const known = !value || props(schema, src).some((p) => p.name === name);
  return html`<select aria-label=${label} value=${value || ''} onChange=${(e) => onChange(e.target.value)}>
    ${none ? html`<option value="" selected=${!value}>${none}</option>` : null}
    ${sources.includes('event') ? group('Event properties', 'event') : null}
    ${sources.includes('user') ? group('User properties', 'user') : null}
    ${known ? null : html`<option value=${value} selected>${name} (not in this app)</option>`}
  </select>`;
}

export const splitProp = (v) => {
  if (!v) return ['event', ''];
  const i = v.indexOf(':');
  return [v.slice(0, i), v.slice(i + 1)];
};

const OPS = [
  ['eq', '='], ['neq', '≠'], ['in', 'in'], ['not_in', 'not in'], ['gt', '>'], ['gte', '≥'],
  ['lt', '<'], ['lte', '≤'], ['contains', 'contains'], ['not_contains', 'does not contain'],
  ['is_set', 'is set'], ['is_not_set', 'is not set'],
];

const valueText = (v) => (v === undefined || v === null ? '' : Array.isArray(v) ? v.join(', ') : String(v));

// coerceValue turns the typed text into the JSON value the property's
// type wants (numbers, booleans, lists for in and not_in); the server
// validates.
function coerceValue(text, f, type) {
  const one = (s) => {
    s = s.trim();
    if ((type === 'int' || type === 'float') && s !== '' && !Number.isNaN(Number(s))) return Number(s);
    if (type === 'bool' && (s === 'true' || s === 'false')) return s === 'true';
    return s;
  };
  if (f.op === 'in' || f.op === 'not_in') return text.split(',').filter((s) => s.trim() !== '').map(one);
  return one(text);
}

// FilterRow edits one filter {property, op, value, source}.
function FilterRow({ f, onChange, label, userOnly }) {
  const { schema } = useApp();
  const source = userOnly ? 'user' : f.source || 'event';
  const type = propType(schema, source, f.property);
  const noValue = f.op === 'is_set' || f.op === 'is_not_set';
  const top = props(schema, source).find((p) => p.name === f.property)?.top || [];
  const listId = `values-${label.replace(/\W+/g, '-')}`;
  return html`<div class="filter">
    <${PropertySelect} label=${`${label} property`} value=${`${source}:${f.property}`} sources=${userOnly ? ['user'] : ['event', 'user']}
      onChange=${(v) => {
        const [s, name] = splitProp(v);
        let g = { ...f, property: name };
        g = userOnly || s === 'event' ? set(g, 'source', undefined) : set(g, 'source', 'user');
        onChange(g);
      }} />
    <${Select} label=${`${label} operator`} class="op" options=${OPS} value=${f.op || 'eq'}
      onChange=${(op) => onChange(op === 'is_set' || op === 'is_not_set' ? set({ ...f, op }, 'value', undefined) : { ...f, op })} />
    ${noValue ? null : html`<input aria-label=${`${label} value`} list=${listId} value=${valueText(f.value)}
      placeholder=${f.op === 'in' || f.op === 'not_in' ? 'a, b, c' : 'value'}
      onChange=${(e) => onChange({ ...f, value: coerceValue(e.target.value, f, type) })} />
      <datalist id=${listId}>${top.map((t) => html`<option value=${t.name} />`)}</datalist>`}
  </div>`;
}

// FilterList edits a list of filters (all must hold); onChange gets the
// new list, or undefined when it becomes empty.
export function FilterList({ filters, onChange, label, addLabel = '+ Filter', userOnly }) {
  const { schema } = useApp();
  const list = filters || [];
  const add = () => {
    const src = userOnly || !props(schema, 'event').length ? 'user' : 'event';
    const first = props(schema, src)[0];
    if (!first) return;
    onChange([...list, { property: first.name, op: 'eq', value: '', ...(src === 'user' && !userOnly ? { source: 'user' } : {}) }]);
  };
  return html`<div class="filters">
    ${list.map((f, i) => html`<div class="item">
      <${FilterRow} f=${f} label=${`${label} ${i + 1}`} userOnly=${userOnly} onChange=${(g) => onChange(setAt(list, i, g))} />
      <button type="button" class="icon" title="Remove filter" aria-label=${`Remove ${label} ${i + 1}`}
        onClick=${() => { const l = setAt(list, i, undefined); onChange(l.length ? l : undefined); }}>×</button>
    </div>`)}
    <button type="button" class="link" onClick=${add}>${addLabel}</button>
  </div>`;
}

// FilterOne edits a single filter (a cohort's user_property condition).
export const FilterOne = ({ f, onChange, label, userOnly }) => html`<${FilterRow} f=${f} onChange=${onChange} label=${label} userOnly=${userOnly} />`;

// MatcherEditor edits an event matcher {event, where} (docs/analytics.md §3): the
// event and its own filters.
export function MatcherEditor({ m, onChange, label, any = true }) {
  return html`<div class="matcher">
    <${EventSelect} label=${`${label} event`} value=${m?.event} any=${any} onChange=${(v) => onChange({ ...m, event: v })} />
    <${FilterList} filters=${m?.where} label=${`${label} filter`} addLabel="+ where"
      onChange=${(w) => onChange(set(m, 'where', w))} />
  </div>`;
}

// Field is a labelled block of the builder.
export const Field = ({ title, hint, children }) => html`<fieldset>
  <legend>${title}${hint ? html`<span class="hint">${hint}</span>` : null}</legend>${children}</fieldset>`;
