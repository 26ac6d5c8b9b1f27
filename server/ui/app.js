// Spur web UI: a Preact app (vendored ES modules, no build step) routed
// by preact-iso. Pages live in pages/, the analyses in kinds/ (one module
// each), the one API client in lib/api.js.
//
//   /                                  → the first app's query page (an old #q= link is kept)
//   /apps/:app/query?q=JSON[&insight=ID]  an analysis, its builder and result
//   /apps/:app/insights                saved insights
//   /apps/:app/dashboards[/:id]        dashboards and their tiles
//   /apps/:app/cohorts                 saved cohorts
//   /apps/:app/persons                 find a person; the refused merges
//   /apps/:app/persons/:id             one person (by any distinct id): its ids, properties and merged trail
//   /apps/:app/users/:id               the same page (the older address)
//   /apps/:app/sdks                    the lines that point each SDK at the server (a new ingest key on request)
//   /apps/:app/admin                   the app's size; deleting the app (its name typed to confirm)
//
// Without an API key, or with one the server refuses, it shows the login
// form (Login); a login URL (…/#key=spur_…) signs in at once.

import { html, render, useEffect, useState } from './lib/html.js';
import { LocationProvider, Router, Route, useLocation } from './vendor/preact-iso-router.js';
import { api, auth } from './lib/api.js';
import { Provide } from './lib/appctx.js';
import { parseQuery, queryURL } from './lib/query.js';
import { num } from './lib/format.js';
import { ErrorBox } from './components/result.js';
import { QueryPage } from './pages/query.js';
import { InsightsPage, DashboardsPage, DashboardPage, CohortsPage } from './pages/saved.js';
import { PersonPage } from './pages/person.js';
import { PersonsPage } from './pages/persons.js';
import { SDKsPage } from './pages/sdks.js';
import { AdminPage } from './pages/admin.js';

const schemas = new Map(); // app → schema promise (refetched on reload)

function Shell({ apps, app, children }) {
  const loc = useLocation();
  const here = (p) => (loc.path.startsWith(`/apps/${app}/${p}`) ? 'active' : '');
  const a = encodeURIComponent(app || '');
  return html`<header class="top">
      <a class="logo" href="/">Spur</a>
      <label class="app-pick">App <select id="app" aria-label="App" value=${app} onChange=${(e) => loc.route(`/apps/${encodeURIComponent(e.target.value)}/query`)}>
        ${apps.map((x) => html`<option value=${x.name} selected=${x.name === app}>${x.name} (${num(x.events)} events)</option>`)}
      </select></label>
      ${app ? html`<nav class="sections" aria-label="Sections">
        <a class=${here('query')} href=${`/apps/${a}/query`}>Analyze</a>
        <a class=${here('insights')} href=${`/apps/${a}/insights`}>Insights</a>
        <a class=${here('dashboards')} href=${`/apps/${a}/dashboards`}>Dashboards</a>
        <a class=${here('cohorts')} href=${`/apps/${a}/cohorts`}>Cohorts</a>
        <a class=${here('persons') || here('users')} href=${`/apps/${a}/persons`}>Persons</a>
        <a class=${here('sdks')} href=${`/apps/${a}/sdks`}>SDKs</a>
        <a class=${here('admin')} href=${`/apps/${a}/admin`}>Admin</a>
      </nav>` : null}
      <button class="link signout" onClick=${signOut}>Sign out</button>
    </header>${children}`;
}

function signOut() {
  auth.clear();
  location.assign('/');
}

// Login asks for an API key; err is why the last one did not do.
function Login({ err, onKey }) {
  const [key, setKey] = useState('');
  const submit = (e) => {
    e.preventDefault();
    if (!key.trim()) return;
    auth.set(key);
    onKey();
  };
  return html`<main class="page login"><h1>Spur</h1>
    <p>This server needs an API key. Open the login URL that <code>spur serve</code> printed when it first started,
      or paste a query or admin key (<code>spur keys create --scope query --app APP</code>).</p>
    ${err ? html`<${ErrorBox} err=${err} />` : null}
    <form onSubmit=${submit}>
      <label>API key <input type="password" name="key" autocomplete="off" placeholder="spur_…" value=${key}
        onInput=${(e) => setKey(e.target.value)} /></label>
      <button class="primary" type="submit">Sign in</button>
    </form></main>`;
}

// AppRoute loads the schema of the route's app and renders page in the
// app context.
function AppRoute({ page: Page, apps, params, ...rest }) {
  const app = params.app;
  const [schema, setSchema] = useState(null);
  const [err, setErr] = useState(null);
  useEffect(() => {
    setSchema(null);
    setErr(null);
    if (!schemas.has(app)) schemas.set(app, api.schema(app));
    schemas.get(app).then(setSchema, (e) => { schemas.delete(app); setErr(e); });
  }, [app]);
  return html`<${Provide} value=${{ apps, app, schema }}><${Shell} apps=${apps} app=${app}>
    ${err ? html`<main class="page"><${ErrorBox} err=${err} /></main>` : schema ? html`<${Page} params=${params} ...${rest} />` : html`<main class="page"><p class="loading">Loading ${app}…</p></main>`}
  <//><//>`;
}

function Home({ apps }) {
  const loc = useLocation();
  useEffect(() => {
    const legacy = /^#q=(.*)$/.exec(location.hash);
    const q = legacy ? parseQuery(decodeURIComponent(legacy[1])) : null;
    const app = q?.app && apps.some((a) => a.name === q.app) ? q.app : apps[0]?.name;
    if (app) loc.route(q ? queryURL(app, q) : `/apps/${encodeURIComponent(app)}/query`, true);
  }, []);
  return html`<${Shell} apps=${apps}>${apps.length ? null : html`<main class="page"><${ErrorBox}
    err=${{ code: 'not_found', message: 'No app to show: the store has none yet, or this key reads none. Send events (POST /api/apps/{app}/events with an ingest key), import them (`spur import`), or run `spur demo --keep DIR` and serve DIR.' }} /></main>`}<//>`;
}

const NotFound = ({ apps }) => html`<${Shell} apps=${apps}><main class="page"><${ErrorBox} err=${{ code: 'not_found', message: `No page ${location.pathname}` }} /></main><//>`;

const routed = (Page) => (props) => html`<${AppRoute} page=${Page} ...${props} />`;
const QueryRoute = routed(QueryPage), InsightsRoute = routed(InsightsPage), DashboardsRoute = routed(DashboardsPage),
  DashboardRoute = routed(DashboardPage), CohortsRoute = routed(CohortsPage), PersonRoute = routed(PersonPage),
  PersonsRoute = routed(PersonsPage), SDKsRoute = routed(SDKsPage), AdminRoute = routed(AdminPage);

function App() {
  const [apps, setApps] = useState(null);
  const [err, setErr] = useState(null);
  const [tries, setTries] = useState(0);
  useEffect(() => { setErr(null); api.apps().then(setApps, setErr); }, [tries]);
  const retry = () => setTries((n) => n + 1);
  if (err?.status === 401 || err?.status === 403) {
    return html`<${Login} err=${auth.key() ? err : null} onKey=${retry} />`;
  }
  if (err) return html`<main class="page"><${ErrorBox} err=${err} /></main>`;
  if (!apps) return html`<main class="page"><p class="loading">Loading…</p></main>`;
  return html`<${LocationProvider}><${Router}>
    <${Route} path="/" component=${Home} apps=${apps} />
    <${Route} path="/apps/:app/query" component=${QueryRoute} apps=${apps} />
    <${Route} path="/apps/:app/insights" component=${InsightsRoute} apps=${apps} />
    <${Route} path="/apps/:app/dashboards" component=${DashboardsRoute} apps=${apps} />
    <${Route} path="/apps/:app/dashboards/:id" component=${DashboardRoute} apps=${apps} />
    <${Route} path="/apps/:app/cohorts" component=${CohortsRoute} apps=${apps} />
    <${Route} path="/apps/:app/persons" component=${PersonsRoute} apps=${apps} />
    <${Route} path="/apps/:app/persons/:id" component=${PersonRoute} apps=${apps} />
    <${Route} path="/apps/:app/users/:id" component=${PersonRoute} apps=${apps} />
    <${Route} path="/apps/:app/sdks" component=${SDKsRoute} apps=${apps} />
    <${Route} path="/apps/:app/admin" component=${AdminRoute} apps=${apps} />
    <${Route} default component=${NotFound} apps=${apps} />
  <//><//>`;
}

render(html`<${App} />`, document.getElementById('root'));
