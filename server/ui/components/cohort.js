// The cohort builder: a docs/analytics.md §7 condition tree — performed (with a count
// and a window), not performed, first performed, a user property, a saved
// cohort, and all of / any of / not — edited node by node.

import { html, useEffect, useState } from '../lib/html.js';
import { useApp, props } from '../lib/appctx.js';
import { api } from '../lib/api.js';
import { set, setAt } from '../lib/query.js';
import { MatcherEditor, FilterOne, Select } from './pickers.js';

const TYPES = [
  ['performed', 'did'], ['not_performed', 'did not do'], ['first_performed', 'did for the first time'],
  ['user_property', 'has user property'], ['saved', 'is in saved cohort'],
  ['and', 'all of'], ['or', 'any of'], ['not', 'not'],
];

export function nodeType(n) {
  if (typeof n === 'string') return 'saved';
  for (const [t] of TYPES) if (n && t in n) return t;
  return 'performed';
}

function newNode(type, names, schema) {
  switch (type) {
    case 'performed': case 'not_performed': case 'first_performed': return { [type]: { event: '$any' } };
    case 'user_property': return { user_property: { property: props(schema, 'user')[0]?.name || '', op: 'is_set' } };
    case 'saved': return names[0] || '';
    case 'and': case 'or': return { [type]: [{ performed: { event: '$any' } }] };
    case 'not': return { not: { performed: { event: '$any' } } };
  }
}

// savedCohorts caches the app's saved cohorts' names; refreshSaved
// forgets them (after a save or delete).
const cache = new Map();
export const refreshSaved = (app) => cache.delete(app);

export function useSavedCohorts(app) {
  const [names, setNames] = useState(cache.get(app) || []);
  useEffect(() => {
    if (cache.has(app)) { setNames(cache.get(app)); return; }
    api.list(app, 'cohorts').then((cs) => {
      const n = cs.map((c) => c.name);
      cache.set(app, n);
      setNames(n);
    }).catch(() => {});
  }, [app]);
  return names;
}

function Window({ w, onChange, label }) {
  const mode = !w ? 'range' : w.last_days !== undefined ? 'last' : 'dates';
  return html`<div class="row window">
    <${Select} label=${`${label} window`} value=${mode}
      options=${[['range', 'in the query range'], ['last', 'in the last N days'], ['dates', 'between dates']]}
      onChange=${(m) => onChange(m === 'range' ? undefined : m === 'last' ? { last_days: 30 } : { from: '', to: '' })} />
    ${mode === 'last' ? html`<input type="number" min="1" aria-label=${`${label} days`} value=${w.last_days}
      onInput=${(e) => onChange({ last_days: Number(e.target.value) || 1 })} />` : null}
    ${mode === 'dates' ? html`<input type="date" aria-label=${`${label} from`} value=${w.from} onChange=${(e) => onChange({ ...w, from: e.target.value })} />
      <input type="date" aria-label=${`${label} to`} value=${w.to} onChange=${(e) => onChange({ ...w, to: e.target.value })} />` : null}
  </div>`;
}

// CohortEditor edits one node (and its children); path labels its
// controls ("Cohort", "Cohort 2", "Cohort 2.1").
export function CohortEditor({ node, onChange, path, root }) {
  const { app, schema } = useApp();
  const names = useSavedCohorts(app);
  const type = nodeType(node);
  const typeSel = html`<${Select} label=${`${path} condition`} options=${TYPES} value=${type}
    onChange=${(t) => onChange(newNode(t, names, schema))} />`;
  const remove = root ? html`<button type="button" class="icon" aria-label=${`Remove ${path}`} title="Remove the cohort filter" onClick=${() => onChange(undefined)}>×</button>` : null;
  let body = null;
  switch (type) {
    case 'performed': case 'not_performed': case 'first_performed': {
      const c = node[type];
      body = html`<${MatcherEditor} m=${c} label=${path} onChange=${(m) => onChange({ ...node, [type]: m })} />
        ${type === 'performed' ? html`<div class="row count">
          <${Select} label=${`${path} count`} value=${node.count?.op || 'gte'} options=${[['gte', 'at least'], ['lte', 'at most'], ['eq', 'exactly']]}
            onChange=${(op) => onChange({ ...node, count: { op, value: node.count?.value ?? 1 } })} />
          <input type="number" min="0" aria-label=${`${path} times`} value=${node.count?.value ?? 1}
            onInput=${(e) => onChange({ ...node, count: { op: node.count?.op || 'gte', value: Number(e.target.value) } })} /><span>times</span>
        </div>` : null}
        <${Window} w=${node.window} label=${path} onChange=${(w) => onChange(set(node, 'window', w))} />`;
      break;
    }
    case 'user_property':
      body = html`<${FilterOne} f=${node.user_property} label=${`${path} user property`} userOnly
        onChange=${(f) => onChange({ user_property: set(f, 'source', undefined) })} />`;
      break;
    case 'saved': {
      const name = typeof node === 'string' ? node : node.saved;
      body = html`<${Select} label=${`${path} saved cohort`} value=${name}
        options=${[['', names.length ? 'Pick a saved cohort' : 'No saved cohort yet'], ...names.map((n) => [n, n])]}
        onChange=${(n) => onChange(typeof node === 'string' ? n : { saved: n })} />`;
      break;
    }
    case 'and': case 'or': {
      const kids = node[type];
      body = html`<div class="kids">
        ${kids.map((k, i) => html`<div class="item">
          <${CohortEditor} node=${k} path=${`${path}.${i + 1}`} onChange=${(c) => onChange({ [type]: c === undefined ? setAt(kids, i, undefined) : setAt(kids, i, c) })} />
          ${kids.length > 1 ? html`<button type="button" class="icon" aria-label=${`Remove ${path}.${i + 1}`} onClick=${() => onChange({ [type]: setAt(kids, i, undefined) })}>×</button>` : null}
        </div>`)}
        <button type="button" class="link" onClick=${() => onChange({ [type]: [...kids, { performed: { event: '$any' } }] })}>+ condition</button>
      </div>`;
      break;
    }
    case 'not':
      body = html`<div class="kids"><${CohortEditor} node=${node.not} path=${`${path}.1`} onChange=${(c) => onChange({ not: c ?? { performed: { event: '$any' } } })} /></div>`;
      break;
  }
  return html`<div class="cond" data-path=${path}><div class="row">${typeSel}${remove}</div>${body}</div>`;
}
