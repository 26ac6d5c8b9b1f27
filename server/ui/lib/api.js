// The one client of Spur's HTTP API (server/server.go lists the
// endpoints). Every call returns the decoded JSON body or throws an
// ApiError carrying the docs/analytics.md §9 error {code, message, field}.
//
// Every request carries the API key (docs/ingest.md §4) as "Authorization:
// Bearer KEY". The key comes from the login URL `spur serve` prints
// (http://HOST/#key=spur_…: in the fragment, which the browser never
// sends to a server), or from the login form; it is kept in
// localStorage and taken out of the address bar at once.

export class ApiError extends Error {
  constructor(status, err) {
    super(err?.message || `HTTP ${status}`);
    this.status = status;
    this.code = err?.code || 'internal';
    this.field = err?.field || '';
    this.errors = err?.errors;
  }
}

const enc = encodeURIComponent;

const keyItem = 'spur.key';

// auth keeps the browser's API key.
export const auth = {
  key: () => localStorage.getItem(keyItem) || '',
  set: (k) => localStorage.setItem(keyItem, k.trim()),
  clear: () => localStorage.removeItem(keyItem),
};

// A login URL's key is stored and removed from the address bar (and so
// from the history) before anything else runs; one opened over a page of
// the UI (only the fragment changes, so nothing reloads) reloads it.
function keyFromURL() {
  const m = /^#key=(spur_[a-z2-7]+)$/.exec(location.hash);
  if (!m) return false;
  auth.set(m[1]);
  history.replaceState(history.state, '', location.pathname + location.search);
  return true;
}
keyFromURL();
addEventListener('hashchange', () => { if (keyFromURL()) location.reload(); });

async function request(method, path, { body, signal, raw } = {}) {
  const opts = { method, signal, headers: {} };
  const key = auth.key();
  if (key) opts.headers.Authorization = `Bearer ${key}`;
  if (body !== undefined) {
    opts.body = typeof body === 'string' ? body : JSON.stringify(body);
    opts.headers['Content-Type'] = 'application/json';
  }
  const resp = await fetch(path, opts);
  if (resp.status === 204) return null;
  if (raw && resp.ok) return resp;
  let data;
  try {
    data = await resp.json();
  } catch {
    throw new ApiError(resp.status, { code: 'internal', message: `HTTP ${resp.status}: the answer is not JSON` });
  }
  if (!resp.ok) throw new ApiError(resp.status, data?.error);
  return data;
}

const app = (a) => `/api/apps/${enc(a)}`;

export const api = {
  // whoami returns the key's record: {id, scope, app, name, auth}.
  whoami: () => request('GET', '/api/key'),
  apps: () => request('GET', '/api/apps').then((r) => r.apps),
  schema: (a) => request('GET', `${app(a)}/schema`),
  // query runs a docs/analytics.md §9 query; signal cancels it (AbortController).
  query: (a, q, { signal, trace } = {}) => request('POST', `${app(a)}/query${trace ? '?trace=1' : ''}`, { body: q, signal }),
  // queryCSV returns the query's tidy CSV as a Blob.
  queryCSV: (a, q, { signal } = {}) => request('POST', `${app(a)}/query?output=csv`, { body: q, signal, raw: true }).then((r) => r.blob()),

  // Saved documents: coll is insights, dashboards or cohorts.
  list: (a, coll) => request('GET', `${app(a)}/${coll}`).then((r) => r[coll]),
  get: (a, coll, id) => request('GET', `${app(a)}/${coll}/${enc(id)}`),
  create: (a, coll, body) => request('POST', `${app(a)}/${coll}`, { body }),
  update: (a, coll, id, version, body) => request('PUT', `${app(a)}/${coll}/${enc(id)}`, { body: { ...body, version } }),
  remove: (a, coll, id, version) => request('DELETE', `${app(a)}/${coll}/${enc(id)}${version ? `?version=${version}` : ''}`),
  insightResult: (a, id, { refresh, signal } = {}) => request('GET', `${app(a)}/insights/${enc(id)}/result${refresh ? '?refresh=1' : ''}`, { signal }),

  // users returns [{user_id (as asked), person_id, distinct_ids, properties}]
  // for at most 1,000 ids; person_id and distinct_ids only where the
  // app's id graph holds the id (and not from a server before persons).
  users: (a, ids) => request('GET', `${app(a)}/users?${ids.map((i) => 'id=' + enc(i)).join('&')}`).then((r) => r.users),
  // person returns the person of any of its distinct ids (docs/identity.md §1):
  // {person_id, user_id, distinct_ids (sorted), properties}; from a server
  // before persons, {user_id, properties}.
  person: (a, id) => personGet(a, id, ''),
  // personEvents returns a page of the person's merged trail: {person_id,
  // distinct_ids, total, offset, limit, tz, events: [{time, event,
  // insert_id, distinct_id, properties}]} (person_id, distinct_ids and
  // distinct_id missing from a server before persons).
  personEvents: (a, id, { offset = 0, limit = 100, tz } = {}) =>
    personGet(a, id, `/events?offset=${offset}&limit=${limit}${tz ? '&tz=' + enc(tz) : ''}`),
  // warnings returns a page of the app's warnings of kind (identity: the
  // refused merges, newest first): {kind, total, offset, limit, warnings:
  // [{seq, time, op, ids: [T, O], reason}]}.
  warnings: (a, kind, { offset = 0, limit = 100 } = {}) =>
    request('GET', `${app(a)}/warnings?kind=${enc(kind)}&offset=${offset}&limit=${limit}`),
  // deletions returns the app's deletion requests in request order (admin
  // keys only; docs/storage.md §7): [{id, kind, requested_at, status
  // ("pending" or "done"), done_at, suppress}], never the ids erased.
  deletions: (a) => request('GET', `${app(a)}/deletions`).then((r) => r.deletions),
  // erasePerson requests the erasure of the person of distinct id id (admin
  // keys only; no undo), with suppress also of its ids' later events: the
  // request as deletions lists it. Asked again while pending, the same one.
  erasePerson: (a, id, { suppress } = {}) => request('DELETE', `${app(a)}/persons/${enc(id)}${suppress ? '?suppress=true' : ''}`),
  // sdkSnippets returns {base, key, placeholder, snippets: [{sdk, language,
  // code}]}: the lines pointing each SDK at the server at base, holding key
  // (a placeholder unless placeholder is false).
  sdkSnippets: (a, base) => request('GET', `${app(a)}/sdk-snippets?base=${enc(base)}`),
  // createKey creates a key (admin keys only): {scope, app, name} →
  // {key (shown this once), id, scope, app, name, created}.
  createKey: (body) => request('POST', '/api/keys', { body }),
  // deleteApp removes the app whole and revokes its keys (admin keys
  // only): {app, files, bytes, keys_revoked}.
  deleteApp: (a) => request('DELETE', app(a)),
  // setRetention sets the app's events retention (admin keys only):
  // "400d", "36h" or "none" → the app's settings {app, tz, shards,
  // retention}.
  setRetention: (a, retention) => request('PATCH', app(a), { body: { retention } }),
};

// noPersons is set once a server answered 404 for /persons/…: one before
// persons, which has only /users/… (the same answers, fewer fields).
let noPersons = false;

// personGet GETs /persons/{id}{rest}, or /users/{id}{rest} from a server
// without person endpoints (an unknown person is no 404, so a 404 of a
// known app is the missing endpoint).
async function personGet(a, id, rest) {
  if (!noPersons) {
    try {
      return await request('GET', `${app(a)}/persons/${enc(id)}${rest}`);
    } catch (err) {
      if (err.status !== 404) throw err;
      noPersons = true;
    }
  }
  return request('GET', `${app(a)}/users/${enc(id)}${rest}`);
}

// download saves a Blob or a data: URL as a file.
export function download(data, name) {
  const url = typeof data === 'string' ? data : URL.createObjectURL(data);
  const a = document.createElement('a');
  a.href = url;
  a.download = name;
  document.body.append(a);
  a.click();
  a.remove();
  if (typeof data !== 'string') setTimeout(() => URL.revokeObjectURL(url), 10_000);
}
