// The analyses the UI offers, in tab order. A kind is one module
// exporting {kind, label, fields, common, defaults(schema), Builder,
// Result}: to add one (stickiness, lifecycle, paths, attribution), write
// kinds/NAME.js and list it here.
//
//   fields   its own top-level query fields (kept per kind while the user
//            switches tabs)
//   common   which shared fields it takes: {where, breakdown, cohort}
//   Builder  ({q, onChange}) edits the query object (immutably)
//   Result   ({q, res, drill, page, chartRef, compact}) renders a result;
//            drill(listCoordinates, title) opens the users of a number

import trend from './trend.js';
import funnel from './funnel.js';
import retention from './retention.js';
import cohort from './cohort.js';

export const KINDS = [trend, funnel, retention, cohort];

export const kindOf = (name) => KINDS.find((k) => k.kind === name);
