// Number, time and label formatting shared by the result views.

const nf = new Intl.NumberFormat('en-US');

// num renders a count or value: integers with separators, others with
// at most two decimals.
export const num = (v) => (v === null || v === undefined ? '–' : Number.isInteger(v) ? nf.format(v) : nf.format(Math.round(v * 100) / 100));
export const pct = (f) => (f === null || f === undefined ? '–' : (100 * f).toFixed(1) + '%');

// duration renders seconds the way the CLI table does: 45s, 13m 0s,
// 19h 2m, 2.5d; "–" for null.
export function duration(sec) {
  if (sec === null || sec === undefined) return '–';
  const s = Math.round(sec);
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${s % 60}s`;
  if (s < 48 * 3600) {
    const m = Math.round(s / 60);
    return `${Math.floor(m / 60)}h ${m % 60}m`;
  }
  return `${(s / 86400).toFixed(1)}d`;
}

// bucketLabel shortens an RFC 3339 bucket start (already in the query's
// zone) to its date, or date and time for sub-day buckets.
export const bucketLabel = (start, hourly) => (hourly ? start.slice(0, 16).replace('T', ' ') : start.slice(0, 10));

// age renders a number of seconds as "12 s", "3 min", "2 h", "4 d".
export function age(sec) {
  if (sec < 60) return `${Math.round(sec)} s`;
  if (sec < 3600) return `${Math.round(sec / 60)} min`;
  if (sec < 86400) return `${Math.round(sec / 3600)} h`;
  return `${Math.round(sec / 86400)} d`;
}

export const COLORS = ['#2563eb', '#db2777', '#16a34a', '#ea580c', '#7c3aed', '#0891b2', '#ca8a04', '#dc2626', '#4b5563', '#65a30d'];

// breakdownLabel names a breakdown value with its property: "country = KR".
export const breakdownLabel = (q, value) => (value === null || value === undefined ? null : q?.breakdown?.property ? `${q.breakdown.property} = ${value}` : value);
