// The query in the URL, and helpers over docs/analytics.md §9 query objects. The
// builder edits the query object itself (immutably), so what it shows is
// what runs, and fields it has no control for (added by a link, the JSON
// editor or a newer server) are kept, not dropped.

export const ANY = '$any';
export const INTERVALS = ['hour', 'day', 'week', 'month'];
export const INTERVAL_SECONDS = { hour: 3600, day: 86400, week: 7 * 86400, month: 30 * 86400 };

// queryURL is the path of the query page of app for q (the query JSON in
// ?q=, exactly).
export function queryURL(app, q) {
  return `/apps/${encodeURIComponent(app)}/query` + (q ? '?q=' + encodeURIComponent(JSON.stringify(q)) : '');
}

// parseQuery decodes the ?q= value; null when absent or not a query.
export function parseQuery(text) {
  if (!text) return null;
  try {
    const q = JSON.parse(text);
    return q && typeof q === 'object' && !Array.isArray(q) && typeof q.kind === 'string' ? q : null;
  } catch {
    return null;
  }
}

// set returns a copy of obj with obj[key] = value, or without key when
// value is undefined.
export function set(obj, key, value) {
  const o = { ...obj };
  if (value === undefined) delete o[key];
  else o[key] = value;
  return o;
}

// setAt returns a copy of list with item i replaced (or removed when
// value is undefined).
export function setAt(list, i, value) {
  const l = [...list];
  if (value === undefined) l.splice(i, 1);
  else l[i] = value;
  return l;
}

export const utcDate = (us) => new Date(us / 1000).toISOString().slice(0, 10);

export function addDays(date, n) {
  const d = new Date(date + 'T00:00:00Z');
  d.setUTCDate(d.getUTCDate() + n);
  return d.toISOString().slice(0, 10);
}

// dataRange is the app's whole data by day: {from, to} dates.
export function dataRange(schema) {
  if (!schema?.events) return undefined;
  return { from: utcDate(schema.min_time), to: addDays(utcDate(schema.max_time), 1) };
}

const UNIT_SECONDS = { h: 3600, d: 86400, w: 7 * 86400, mo: 30 * 86400, y: 365 * 86400 };

// rangeSeconds estimates the length of a query's range in seconds (a
// relative range by its duration, no range by the app's data).
export function rangeSeconds(range, schema) {
  const r = range || dataRange(schema);
  if (!r) return 0;
  if (r.last) {
    const m = /^(\d+)(h|d|w|mo|y)$/.exec(r.last);
    return m ? Number(m[1]) * UNIT_SECONDS[m[2]] : 0;
  }
  const t = (s) => Date.parse(s.length === 10 ? s + 'T00:00:00Z' : s);
  return Math.max(0, (t(r.to) - t(r.from)) / 1000);
}

// MAX_POINTS is the most buckets a chart draws: past it the trend's
// interval is coarsened (with a notice) unless the user keeps it.
export const MAX_POINTS = 1000;

// coarsen returns the finest interval, starting at interval, whose
// number of buckets over the query's range is at most MAX_POINTS, and the
// estimated bucket count of interval.
export function coarsen(interval, range, schema) {
  const sec = rangeSeconds(range, schema);
  const n = (iv) => Math.ceil(sec / INTERVAL_SECONDS[iv]);
  let i = INTERVALS.indexOf(interval || 'day');
  const points = n(INTERVALS[i]);
  while (i < INTERVALS.length - 1 && n(INTERVALS[i]) > MAX_POINTS) i++;
  return { interval: INTERVALS[i], points };
}

// describeList says which number a query's list lists.
export function describeList(l) {
  if (!l) return '';
  const parts = [];
  if (l.series !== undefined) parts.push(`series ${String.fromCharCode(65 + l.series)}`);
  if (l.intervals) parts.push(`active in ${l.intervals} interval${l.intervals > 1 ? 's' : ''}`);
  if (l.status) parts.push(l.status);
  if (l.bucket) parts.push(`bucket ${l.bucket.slice(0, 16).replace('T', ' ')}`);
  if (l.bin !== undefined) parts.push(`time-to-convert bin ${l.bin}`);
  if (l.step) parts.push(`${l.dropped ? 'dropped after' : 'reached'} step ${l.step}`);
  if (l.cohort_start) parts.push(`cohort ${l.cohort_start.slice(0, 10)}`);
  if (l.period !== undefined && l.cohort_start) parts.push(`period ${l.period}`);
  if (l.source) parts.push(`edge ${l.source} → ${l.target}`);
  if (l.channel !== undefined) parts.push(`channel ${l.channel}`);
  if (l.breakdown_value !== undefined) parts.push(`breakdown ${l.breakdown_value}`);
  return parts.join(', ') || 'all users';
}
