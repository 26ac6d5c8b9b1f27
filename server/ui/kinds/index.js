// The analyses the UI offers, in tab order. A kind is one module
// exporting {kind, label, fields, common, defaults(schema), Builder,
// Result} and optionally {interval, from}: to add one, write
// kinds/NAME.js and list it here.
//
//   fields    its own top-level query fields (kept per kind while the
//             user switches tabs)
//   common    which shared fields it takes: {where, breakdown, cohort};
//             breakdown may be options of BreakdownField ({sources:
//             ['user']}, {attribution: true})
//   interval  (q) → the calendar interval q buckets by, or null: a finer
//             one than the chart can draw is coarsened
//   from      (q) → fields to set when switching to it from query q
//   Builder   ({q, onChange}) edits the query object (immutably)
//   Result    ({q, res, drill, page, chartRef, compact, onQuery}) renders
//             a result; drill(listCoordinates, title, patch) opens the
//             users of a number (in the query changed by patch);
//             onQuery(q) runs another query (a view or model switch)

import trend from './trend.js';
import funnel from './funnel.js';
import retention from './retention.js';
import stickiness from './stickiness.js';
import lifecycle from './lifecycle.js';
import paths from './paths.js';
import attribution from './attribution.js';
import cohort from './cohort.js';

export const KINDS = [trend, funnel, retention, stickiness, lifecycle, paths, attribution, cohort];

export const kindOf = (name) => KINDS.find((k) => k.kind === name);
