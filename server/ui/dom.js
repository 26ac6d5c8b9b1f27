// Tiny DOM helpers: h builds an element, clear empties one.

// h(tag, attrs, ...children): attrs "on…" keys become listeners, "class"
// sets className, other keys become attributes (false/null/undefined are
// skipped); children are nodes, strings or null (skipped).
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.className = v;
    else if (k === 'value' && (tag === 'input' || tag === 'select')) el.value = v;
    else el.setAttribute(k, v === true ? '' : v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : String(c));
  }
  return el;
}

// clear removes every child of el and returns it.
export function clear(el) {
  el.replaceChildren();
  return el;
}
