// The app context: the apps of the store, the current app and its schema
// (event names with counts, property types with top values), shared by
// every page.

import { h } from '../vendor/preact.mjs';
import { createContext } from '../vendor/preact.mjs';
import { useContext } from '../vendor/preact-hooks.mjs';

export const AppContext = createContext({ apps: [], app: '', schema: null });

export const useApp = () => useContext(AppContext);

export const Provide = ({ value, children }) => h(AppContext.Provider, { value }, children);

export const eventNames = (schema) => (schema?.event_names || []).map((e) => e.name);

export const props = (schema, source) => (source === 'user' ? schema?.user_props : schema?.event_props) || [];

export const propType = (schema, source, name) => props(schema, source || 'event').find((p) => p.name === name)?.type;

// topEvent is the i-th most frequent event name, or $any.
export function topEvent(schema, i) {
  const n = eventNames(schema);
  return n[Math.min(i, n.length - 1)] || '$any';
}
