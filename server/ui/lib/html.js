// The UI's component toolkit: Preact (vendor/preact.mjs) with htm tagged
// templates, so components are plain ES modules with no build step.

import { h, render, Fragment } from '../vendor/preact.mjs';
import htm from '../vendor/htm.mjs';

export { h, render, Fragment };
export { useState, useEffect, useMemo, useRef, useCallback, useReducer, useContext } from '../vendor/preact-hooks.mjs';

// html is the tagged template every component renders with:
// html`<div class=${c}>${x}</div>`.
export const html = htm.bind(h);
