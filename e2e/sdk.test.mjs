// Browser tests of SDK capture (docs/ingest.md §6, issue 28): the real
// posthog-js and @segment/analytics-next, installed from npm (package.json
// pins them) and loaded from their prebuilt browser bundles, run in
// headless Chromium on a shop page served by a small node server at
// http://localhost:PORT — another origin and another site than the spur
// serve of the harness (127.0.0.1), so capture requests are real
// cross-site CORS requests — and send to spur's /ingest/ paths with an
// ingest key created through the admin API. The tests read the SDKs'
// requests as they went on the wire and check, through the persons API
// and a trend query, that the events, their properties, the persons'
// distinct ids and properties come out exactly as sent; that a failed
// send (a 503 before the server saw it, and a 503 replacing the answer to
// a request the server stored) is resent by the SDK and stored once; that
// the page sends nothing to other hosts; and that it logs no error but
// the failed loads of those 503s. Run through e2e/run.sh (after ui.test.mjs and
// analyses.test.mjs: the store's admin key is theirs); SPUR_SDK_LOGS=1
// prints each page's console and requests to spur.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { readFileSync } from 'node:fs';
import { gunzipSync } from 'node:zlib';
import { page, base, fetchAPI } from './harness.mjs';

const bundles = {
  '/vendor/posthog.js': new URL('node_modules/posthog-js/dist/array.full.js', import.meta.url),
  '/vendor/analytics-next.js': new URL('node_modules/@segment/analytics-next/dist/umd/index.js', import.meta.url),
};
// shopPage is the test page: the SDK's bundle in a script tag, as a site
// includes it (no favicon request).
const shopPage = (bundle) => `<!doctype html><html><head><meta charset="utf-8"><title>Shop</title>
<link rel="icon" href="data:,"><script src="${bundle}"></script></head><body><h1>Shop</h1></body></html>`;

let shopServer, shopURL; // the shop's server and its base URL

before(async () => {
  shopServer = createServer((req, res) => {
    const path = new URL(req.url, 'http://x').pathname;
    if (bundles[path]) {
      res.writeHead(200, { 'Content-Type': 'text/javascript' }).end(readFileSync(bundles[path]));
    } else if (path === '/posthog.html' || path === '/segment.html') {
      res.writeHead(200, { 'Content-Type': 'text/html' }).end(shopPage(path === '/posthog.html' ? '/vendor/posthog.js' : '/vendor/analytics-next.js'));
    } else {
      res.writeHead(404).end();
    }
  });
  await new Promise((resolve) => shopServer.listen(0, '127.0.0.1', resolve));
  shopURL = `http://localhost:${shopServer.address().port}/`;
});

after(() => new Promise((resolve) => shopServer.close(resolve)));

// createIngestKey creates an ingest key of app through the admin API.
async function createIngestKey(app) {
  const resp = await fetchAPI('api/keys', { method: 'POST', body: JSON.stringify({ scope: 'ingest', app, name: `sdk test ${app}` }) });
  const body = await resp.json();
  assert.equal(resp.status, 201, JSON.stringify(body));
  assert.equal(body.scope, 'ingest');
  return body.key;
}

async function getJSON(path) {
  const resp = await fetchAPI(path);
  const body = await resp.json();
  assert.equal(resp.status, 200, `${path}: ${JSON.stringify(body)}`);
  return body;
}

// withShop opens the shop page (html) in a new tab of the harness's
// browser with a clean slate (no cookies, no local storage) and a desktop
// Chrome's user agent, records the tab's requests to spur's /ingest/ paths
// (wire: {method, path, query, headers, gzip, body (decoded JSON),
// status}, in the order sent) and its console messages, runs
// fn({tab, wire, logs, settled}) and closes the tab. Then the tab must
// have sent nothing to other hosts than spur and the shop, and its
// console must hold no error but those allowed lists (each matched
// once). clock: playwright's fake clock is installed first (tab.clock).
async function withShop(html, { allowed = [], clock = false }, fn) {
  const ctx = page.context();
  await ctx.clearCookies();
  const tab = await ctx.newPage();
  const wire = [];
  const logs = [];
  const elsewhere = [];
  const ingest = base + 'ingest/';
  tab.on('request', (req) => {
    if (!req.url().startsWith(base) && !req.url().startsWith(shopURL) && !req.url().startsWith('about:')) elsewhere.push(`${req.method()} ${req.url()}`);
    if (!req.url().startsWith(ingest)) return;
    const raw = req.postDataBuffer();
    const gzip = raw?.[0] === 0x1f && raw?.[1] === 0x8b;
    const body = raw?.length ? JSON.parse((gzip ? gunzipSync(raw) : raw).toString('utf8')) : null;
    const u = new URL(req.url());
    wire.push({ req, method: req.method(), path: u.pathname, query: u.searchParams, headers: req.headers(), gzip, body, status: undefined });
  });
  tab.on('response', (resp) => {
    const w = wire.find((x) => x.req === resp.request());
    if (w) w.status = resp.status();
  });
  tab.on('requestfailed', (req) => {
    const w = wire.find((x) => x.req === req);
    if (w) w.status = `failed: ${req.failure()?.errorText}`;
  });
  tab.on('pageerror', (e) => logs.push({ type: 'pageerror', text: e.message }));
  tab.on('console', (m) => logs.push({ type: m.type(), text: m.text() }));
  // A desktop Chrome's user agent (the header and navigator.userAgent),
  // not headless Chromium's, which user-agent parsers class as a bot.
  const cdp = await ctx.newCDPSession(tab);
  await cdp.send('Emulation.setUserAgentOverride', { userAgent: (await tab.evaluate(() => navigator.userAgent)).replace('HeadlessChrome/', 'Chrome/') });
  // The SDKs keep their ids in the shop origin's storage too.
  await tab.addInitScript(() => {
    try {
      localStorage.clear();
    } catch {
      // about:blank has none
    }
  });
  if (clock) await tab.clock.install();
  await tab.goto(shopURL + html);
  // settled waits until n capture requests (isCapture: not flags,
  // config or settings; count: counts them) have their answers, and
  // returns them.
  const settled = async (n, isCapture, count = (caps) => caps.length) => {
    const t0 = Date.now();
    for (;;) {
      const caps = wire.filter(isCapture);
      if (count(caps) >= n && caps.every((w) => w.status !== undefined)) return caps;
      assert.ok(Date.now() - t0 < 30_000, `waited 30 s for ${n} capture requests; saw ${JSON.stringify(wire.map((w) => [w.method, w.path, w.status]))}; console: ${JSON.stringify(logs)}`);
      await tab.waitForTimeout(100);
    }
  };
  try {
    await fn({ tab, wire, logs, settled });
  } finally {
    await tab.close();
  }
  if (process.env.SPUR_SDK_LOGS) console.log(html, JSON.stringify(logs), JSON.stringify(wire.map((w) => [w.method, w.path + (w.query.size ? '?' + w.query : ''), w.status])));
  assert.deepEqual(elsewhere, [], 'the tab sent requests to other hosts');
  const left = [...allowed];
  const unexpected = logs.filter((l) => l.type === 'error' || l.type === 'pageerror').filter((e) => {
    const i = left.findIndex((re) => re.test(e.text));
    if (i >= 0) left.splice(i, 1);
    return i < 0;
  });
  assert.deepEqual(unexpected, [], 'the page logged errors');
  assert.deepEqual(left, [], 'expected console errors not logged');
}

// goJSON is Go's encoding/json text of a decoded JSON value: object keys
// sorted, <, > and & escaped (spur stores an object or array property as
// that text).
function goJSON(v) {
  const esc = (s) => JSON.stringify(s).replace(/[<>&\u2028\u2029]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
  if (v === null || typeof v !== 'object') return typeof v === 'string' ? esc(v) : JSON.stringify(v);
  if (Array.isArray(v)) return `[${v.map(goJSON).join(',')}]`;
  return `{${Object.keys(v).sort().map((k) => `${esc(k)}:${goJSON(v[k])}`).join(',')}}`;
}

// stored is a JSON property value as spur answers it: scalars as they
// are, objects and arrays as their JSON text; undefined for null (not
// stored).
const stored = (v) => (v === null || v === undefined ? undefined : typeof v === 'object' ? goJSON(v) : v);

// putAll sets out[prefix + k] = stored(v) for each member of m not
// skipped; flat: nested objects as dotted names (Segment's context).
function putAll(out, m, { prefix = '', skip = () => false, flat = false } = {}) {
  for (const [k, v] of Object.entries(m || {})) {
    if (skip(k)) continue;
    if (flat && v !== null && typeof v === 'object' && !Array.isArray(v)) {
      putAll(out, v, { prefix: `${prefix}${k}.`, flat });
    } else if (stored(v) !== undefined) {
      out[prefix + k] = stored(v);
    }
  }
  return out;
}

// micros is an instant in spur's answer format (UTC, microseconds).
const micros = (ms) => new Date(ms).toISOString().replace('Z', '000Z');

// uuidv7Millis is the Unix millisecond time of a UUIDv7.
const uuidv7Millis = (u) => parseInt(u.replaceAll('-', '').slice(0, 12), 16);

// personEvents polls the persons API until person id has n events, and
// returns its trail, which must hold exactly n.
async function personEvents(app, id, n) {
  const path = `api/apps/${app}/persons/${encodeURIComponent(id)}/events?limit=1000`;
  const t0 = Date.now();
  let got;
  for (;;) {
    got = await getJSON(path);
    if (got.total >= n) break;
    assert.ok(Date.now() - t0 < 20_000, `${path}: waited 20 s for ${n} events, have ${got.total}`);
    await new Promise((r) => setTimeout(r, 200));
  }
  assert.equal(got.total, n, `${path}: the events`);
  return got;
}

// rows are events as the persons API lists them, in (time, insert id)
// order (spur's order is time, then arrival); userAgent false leaves
// out the $browser, $os and $device_type spur derives from a Segment
// message's context.userAgent after checking them (desktop Chrome on
// Linux, named as posthog-js names them).
function rows(events, userAgent = true) {
  return events.map(({ event, distinct_id, time, insert_id, properties }) => {
    if (!userAgent) {
      const { $browser, $os, $device_type, ...rest } = properties;
      assert.deepEqual([$browser, $os, $device_type], ['Chrome', 'Linux', 'Desktop'], 'derived from context.userAgent');
      properties = rest;
    }
    return { event, distinct_id, time, insert_id, properties };
  }).sort((a, b) => a.time.localeCompare(b.time) || a.insert_id.localeCompare(b.insert_id));
}

// trendTotals asks spur for app's events and users over everything.
async function trendTotals(app) {
  const resp = await fetchAPI(`api/apps/${app}/query`, {
    method: 'POST',
    body: JSON.stringify({ kind: 'trend', app, range: { last: '2d' }, series: [{ event: '$any' }, { event: '$any', math: 'users' }] }),
  });
  const body = await resp.json();
  assert.equal(resp.status, 200, JSON.stringify(body));
  return body.series.map((s) => s.total);
}

// ---- PostHog ---------------------------------------------------------

const POSTHOG_TRANSPORT = new Set(['token', 'distinct_id', '$set', '$set_once', '$unset']);

const isPostHogCapture = (w) => /^\/ingest\/posthog\/(e|i\/v0\/e)\/?$/.test(w.path);

// posthogEvents are the events of the wire's capture requests (/e/),
// each with the request's index and status (a beacon's body is not
// seen: beaconBodies).
function posthogEvents(wire) {
  const out = [];
  wire.forEach((w, i) => {
    if (!isPostHogCapture(w) || !w.body) return;
    const b = w.body;
    for (const ev of Array.isArray(b) ? b : b.batch ?? [b]) out.push({ ...ev, request: i, status: w.status });
  });
  return out;
}

// posthogStored is what spur stores of a posthog-js event: its name,
// distinct id, time (its timestamp, else the UUIDv7's), insert id (uuid)
// and properties (all but the transport keys).
function posthogStored(ev) {
  return {
    event: ev.event,
    distinct_id: ev.properties.distinct_id ?? ev.distinct_id,
    time: micros(ev.timestamp ? Date.parse(ev.timestamp) : uuidv7Millis(ev.uuid)),
    insert_id: ev.uuid,
    properties: putAll({}, ev.properties, { skip: (k) => POSTHOG_TRANSPORT.has(k) }),
  };
}

// posthogPersonProps folds the person properties of evs ($set and
// $set_once, top level and in properties; the properties' win) in time
// order, skipping events without person processing.
function posthogPersonProps(evs) {
  const props = {};
  const at = (e) => (e.timestamp ? Date.parse(e.timestamp) : uuidv7Millis(e.uuid));
  const sorted = evs.map((e, i) => [e, i]).sort(([a, i], [b, j]) => at(a) - at(b) || i - j);
  for (const [ev] of sorted) {
    if (ev.properties.$process_person_profile === false) continue;
    for (const [k, v] of Object.entries({ ...ev.$set_once, ...ev.properties.$set_once })) if (!(k in props) && stored(v) !== undefined) props[k] = stored(v);
    putAll(props, { ...ev.$set, ...ev.properties.$set });
  }
  return props;
}

// loadPostHog loads posthog-js in tab, pointed at spur, and resolves
// when it is loaded; it answers the anonymous distinct id.
function loadPostHog(tab, key, extra = {}) {
  return tab.evaluate(([key, host, extra]) => new Promise((resolve) => {
    window.posthog.init(key, {
      api_host: host, autocapture: false, capture_pageview: false, capture_pageleave: false,
      disable_session_recording: true, request_batching: false,
      // Headless Chromium's user agent names it a bot.
      opt_out_useragent_filter: true, ...extra,
      loaded: (ph) => resolve(ph.get_distinct_id()),
    });
  }), [key, base + 'ingest/posthog', extra]);
}

test('posthog-js: capture, identify, alias and person properties arrive exactly, as one person', async () => {
  const app = 'sdk-posthog';
  const key = await createIngestKey(app);
  await withShop('posthog.html', {}, async (shop) => {
    // Flags on (posthog-js's default): spur's /flags/ answers "no flags".
    const anon = await loadPostHog(shop.tab, key);
    assert.match(anon, /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-/, 'an anonymous UUIDv7 distinct id');
    await shop.tab.evaluate(() => {
      const ph = window.posthog;
      ph.capture('signup', { plan: 'free', n: 1, price: 9.5, trial: true, tags: ['a', 'b'], address: { city: 'Oslo', zip: '0150' } });
      ph.identify('user-1', { email: 'u1@example.com', plan: 'free' }, { first_seen: '2026-01-01' });
      ph.capture('purchase', { amount: 42, currency: 'EUR' });
      ph.alias('alias-1');
      ph.setPersonProperties({ plan: 'pro' }, { signup_source: 'ads', first_seen: 'never' });
    });
    const caps = await shop.settled(5, isPostHogCapture);
    assert.deepEqual(caps.map((w) => w.status), [200, 200, 200, 200, 200]);
    for (const w of caps) {
      assert.ok(w.gzip, 'posthog-js sends gzip bodies ...');
      assert.equal(w.headers['content-encoding'], undefined, '... without Content-Encoding');
      assert.match(w.headers['content-type'], /^text\/plain/, '... as text/plain');
    }
    const sent = posthogEvents(shop.wire);
    assert.deepEqual(sent.map((e) => [e.event, e.properties.distinct_id]),
      [['signup', anon], ['$identify', 'user-1'], ['purchase', 'user-1'], ['$create_alias', 'user-1'], ['$set', 'user-1']]);
    assert.equal(sent[1].properties.$anon_distinct_id, anon);
    // posthog-js 1.449 sends an ISO timestamp (and the batch's sent_at)
    // besides the UUIDv7 uuid; spur stores the timestamp (within
    // --max-clock-skew) and the uuid as the insert id.
    for (const e of sent) assert.match(e.timestamp, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);

    // The person: every distinct id, and the events of all of them.
    const trail = await personEvents(app, 'user-1', 5);
    assert.deepEqual(trail.distinct_ids, ['alias-1', anon, 'user-1'].sort());
    assert.deepEqual(rows(trail.events), rows(sent.map(posthogStored)));
    const byName = Object.fromEntries(trail.events.map((e) => [e.event, e]));
    assert.deepEqual(
      { plan: byName.signup.properties.plan, n: byName.signup.properties.n, price: byName.signup.properties.price, trial: byName.signup.properties.trial,
        tags: byName.signup.properties.tags, address: byName.signup.properties.address, amount: byName.purchase.properties.amount },
      { plan: 'free', n: 1, price: 9.5, trial: true, tags: '["a","b"]', address: '{"city":"Oslo","zip":"0150"}', amount: 42 });
    assert.equal(byName.$identify.properties.$anon_distinct_id, anon);
    assert.equal(byName.$create_alias.properties.alias, 'alias-1');

    for (const id of [anon, 'user-1', 'alias-1']) {
      const person = await getJSON(`api/apps/${app}/persons/${encodeURIComponent(id)}`);
      assert.equal(person.person_id, trail.person_id, `${id} is the person's`);
      assert.deepEqual(person.distinct_ids, trail.distinct_ids);
      assert.deepEqual(person.properties, posthogPersonProps(sent));
      assert.deepEqual([person.properties.email, person.properties.plan, person.properties.first_seen, person.properties.signup_source],
        ['u1@example.com', 'pro', '2026-01-01', 'ads']);
    }
    assert.deepEqual(await trendTotals(app), [5, 1]);
  });
});

// spyBeacons records the bodies the page hands to navigator.sendBeacon
// (which still sends them): playwright reports a beacon's request but not
// its body. beaconBodies returns them decoded.
const spyBeacons = (tab) => tab.evaluate(() => {
  const send = navigator.sendBeacon.bind(navigator);
  window.spurBeacons = [];
  navigator.sendBeacon = (url, data) => {
    window.spurBeacons.push({ url, data });
    return send(url, data);
  };
});

async function beaconBodies(tab) {
  const raw = await tab.evaluate(() => Promise.all(window.spurBeacons.map(async (b) => ({
    url: b.url, bytes: [...new Uint8Array(await new Response(b.data).arrayBuffer())],
  }))));
  return raw.map(({ url, bytes }) => {
    const buf = Buffer.from(bytes);
    return { path: new URL(url).pathname, body: JSON.parse((buf[0] === 0x1f && buf[1] === 0x8b ? gunzipSync(buf) : buf).toString('utf8')) };
  });
}

test('posthog-js with its defaults: batched events, and the queue sent by sendBeacon on pagehide, arrive exactly', async () => {
  const app = 'sdk-posthog-defaults';
  const key = await createIngestKey(app);
  await withShop('posthog.html', {}, async (shop) => {
    await spyBeacons(shop.tab);
    // Only the host (and the bot filter off: posthog-js takes the
    // automated browser for a bot): posthog-js's defaults batch events
    // (flushed every 3 s), send a $pageview at start and a $pageleave on
    // pagehide, and load the remote config and flags from spur.
    const anon = await shop.tab.evaluate(([key, host]) => new Promise((resolve) => {
      window.posthog.init(key, { api_host: host, opt_out_useragent_filter: true, loaded: (ph) => resolve(ph.get_distinct_id()) });
    }), [key, base + 'ingest/posthog']);
    await shop.settled(1, isPostHogCapture);
    // Three events in the queue, then the page is hidden as when it is
    // left (the event, not a navigation: playwright does not report a
    // departed page's requests): posthog-js sends the queue and a
    // $pageleave with navigator.sendBeacon.
    await shop.tab.evaluate(() => {
      for (let i = 0; i < 3; i++) window.posthog.capture('step', { i });
      window.dispatchEvent(new PageTransitionEvent('pagehide', { persisted: false }));
    });
    const beacons = await beaconBodies(shop.tab);
    const caps = await shop.settled(1 + beacons.length, isPostHogCapture);
    assert.deepEqual(caps.map((w) => [w.path, w.status, w.body === null]), [['/ingest/posthog/e/', 200, false],
      ...beacons.map((b) => [b.path, 200, true])], 'the $pageview by fetch, the rest by beacons, all answered 200');
    const sent = [...posthogEvents(shop.wire), ...posthogEvents(beacons)];
    assert.deepEqual(sent.map((e) => e.event).sort(), ['$pageleave', '$pageview', 'step', 'step', 'step']);
    const trail = await personEvents(app, anon, 5);
    assert.deepEqual(rows(trail.events), rows(sent.map(posthogStored)));
    assert.deepEqual(trail.events.filter((e) => e.event === 'step').map((e) => e.properties.i), [0, 1, 2]);
    assert.deepEqual((await getJSON(`api/apps/${app}/persons/${anon}`)).properties, {}, 'anonymous events make no person (identified_only)');
    assert.deepEqual(await trendTotals(app), [5, 1]);
  });
});

// failOnce makes the next request of tab to a path pathRe fail with 503
// and Retry-After: 1, spur's backpressure answer: forward false fails it
// before spur sees it, forward true lets spur store it and replaces the
// answer (a lost acknowledgement). It resolves to spur's answer to the
// forwarded request. Without keep the route serves that request only,
// so the SDK's resend goes to spur untouched, CORS preflight included;
// with keep it stays (passing later requests on), and playwright answers
// the CORS preflights itself while a route is set.
function failOnce(tab, pathRe, forward, keep = false) {
  let used = false;
  return new Promise((resolve, reject) => {
    tab.route((u) => pathRe.test(u.pathname), async (route) => {
      if (used) return route.fallback();
      used = true;
      try {
        let answer = null;
        const headers = { 'Retry-After': '1', 'Content-Type': 'application/json', 'Access-Control-Allow-Origin': '*' };
        if (forward) {
          const resp = await route.fetch();
          answer = { status: resp.status(), body: await resp.json() };
        }
        await route.fulfill({ status: 503, headers, body: '{"error":{"code":"unavailable","message":"test: try again"}}' });
        resolve(answer);
      } catch (err) {
        reject(err);
      }
    }, { times: keep ? undefined : 1 });
  });
}

const failed503 = /Failed to load resource: the server responded with a status of 503/;

test('posthog-js: a send answered 503 is resent and stored once, whether spur stored it or not', async () => {
  const app = 'sdk-posthog-retry';
  const key = await createIngestKey(app);
  await withShop('posthog.html', { allowed: [failed503, failed503] }, async (shop) => {
    // Flags off (posthog-js's advanced_disable_flags): no /flags/ request.
    const anon = await loadPostHog(shop.tab, key, { advanced_disable_flags: true });
    const path = /^\/ingest\/posthog\/e\/?$/;
    const lost = failOnce(shop.tab, path, false);
    await shop.tab.evaluate(() => window.posthog.capture('first', { k: 1 }));
    assert.equal(await lost, null);
    const stored = failOnce(shop.tab, path, true);
    await shop.tab.evaluate(() => window.posthog.capture('second', { k: 2 }));
    assert.deepEqual(await stored, { status: 200, body: { status: 1 } }, 'spur stored the second send');
    // posthog-js resends from its retry queue after Retry-After and its
    // backoff (3 s ± 50%), with ?retry_count=1.
    const caps = await shop.settled(4, isPostHogCapture);
    assert.deepEqual(caps.map((w) => w.status), [503, 503, 200, 200]);
    assert.ok(shop.wire.every((w) => w.path !== '/ingest/posthog/flags/'), 'no flags request');
    const sent = posthogEvents(shop.wire);
    assert.deepEqual(sent.map((e) => [e.event, e.status, shop.wire[e.request].query.get('retry_count')]).sort(),
      [['first', 200, '1'], ['first', 503, null], ['second', 200, '1'], ['second', 503, null]]);
    for (const name of ['first', 'second']) {
      const [a, b] = sent.filter((e) => e.event === name);
      assert.deepEqual(b, { ...a, request: b.request, status: b.status }, `${name}: the resend carries the same event (uuid, timestamp, properties)`);
    }

    const trail = await personEvents(app, anon, 2);
    const want = ['first', 'second'].map((n) => posthogStored(sent.find((e) => e.event === n)));
    assert.deepEqual(rows(trail.events), rows(want));
    assert.deepEqual(await trendTotals(app), [2, 1]);
    await shop.tab.waitForTimeout(1000);
    assert.equal((await personEvents(app, anon, 2)).total, 2, 'no late copy');
  });
});

// ---- Segment ---------------------------------------------------------

const isSegmentCapture = (w) => /^\/ingest\/segment\/v1\/[tipsgab]$/.test(w.path);

const SEGMENT_EVENT = { page: '$pageview', screen: '$screen', identify: '$identify', alias: '$create_alias', group: '$groupidentify' };

// segmentStored is what spur stores of an analytics-next message (but
// the $browser, $os and $device_type spur derives from
// context.userAgent): page and screen name and category, identify's
// $anon_distinct_id, alias's alias (previousId), the properties, the
// context flattened as context.* properties.
function segmentStored(m) {
  const props = {};
  if (m.type === 'page' || m.type === 'screen') putAll(props, { name: m.name, category: m.category });
  if (m.type === 'identify' && m.userId && m.anonymousId) props.$anon_distinct_id = m.anonymousId;
  if (m.type === 'alias') props.alias = m.previousId;
  putAll(props, m.properties, { skip: (k) => k in props });
  putAll(props, m.context, { prefix: 'context.', flat: true });
  return {
    event: m.type === 'track' ? m.event : SEGMENT_EVENT[m.type], distinct_id: m.userId || m.anonymousId,
    time: micros(Date.parse(m.timestamp)), insert_id: m.messageId, properties: props,
  };
}

// loadSegment loads analytics-next in tab with settings and options
// (AnalyticsBrowser.load's arguments) and answers its anonymous id.
function loadSegment(tab, settings, options = {}) {
  return tab.evaluate(async ([settings, options]) => {
    const [analytics] = await window.AnalyticsNext.AnalyticsBrowser.load(settings, options);
    window.ajs = analytics;
    return analytics.user().anonymousId();
  }, [settings, options]);
}

test('analytics-next: track, page, alias and identify arrive exactly, as one person, with the settings served by spur', async () => {
  const app = 'sdk-segment';
  const key = await createIngestKey(app);
  await withShop('segment.html', {}, async (shop) => {
    // cdnURL at spur: analytics-next fetches its settings from
    // {cdnURL}/v1/projects/{key}/settings, whose Segment.io integration
    // points its events back at spur.
    const anon = await loadSegment(shop.tab, { writeKey: key, cdnURL: base + 'ingest/segment' });
    assert.match(anon, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-/, 'an anonymous UUIDv4');
    await shop.tab.evaluate(async () => {
      const a = window.ajs;
      await a.track('signup', { plan: 'free', n: 1, price: 9.5, trial: true, tags: ['a', 'b'], address: { city: 'Oslo', zip: '0150' } });
      await a.page('Docs', 'Intro', { section: 'start' });
      // Segment's order: alias the new id to the anonymous one, then
      // identify. (After identify, analytics-next 1.84.3 sends alias(x)
      // with userId and previousId both the identified id: its event
      // factory puts the user's id over the alias's userId.)
      await a.alias('user-1');
      await a.identify('user-1', { email: 'u1@example.com', plan: 'pro' });
      await a.track('purchase', { amount: 42, currency: 'EUR' });
    });
    const caps = await shop.settled(5, isSegmentCapture);
    assert.deepEqual(shop.wire[0].path, `/ingest/segment/v1/projects/${key}/settings`);
    assert.deepEqual(caps.map((w) => [w.path, w.status]).sort(),
      [['/ingest/segment/v1/a', 200], ['/ingest/segment/v1/i', 200], ['/ingest/segment/v1/p', 200], ['/ingest/segment/v1/t', 200], ['/ingest/segment/v1/t', 200]]);
    for (const w of caps) {
      assert.equal(w.headers.authorization, `Basic ${btoa(key + ':')}`, 'the write key in Basic auth (a CORS preflight)');
      assert.match(w.headers['content-type'], /^text\/plain/);
    }
    const sent = caps.map((w) => w.body);
    const byType = Object.fromEntries(sent.map((m) => [m.type === 'track' ? m.event : m.type, m]));
    assert.deepEqual([byType.signup.userId, byType.page.userId, byType.alias.userId, byType.alias.previousId, byType.identify.userId, byType.purchase.userId],
      [null, null, 'user-1', anon, 'user-1', 'user-1']);
    assert.ok(sent.every((m) => m.anonymousId === anon && m.writeKey === key));

    const trail = await personEvents(app, 'user-1', 5);
    assert.deepEqual(trail.distinct_ids, [anon, 'user-1'].sort());
    const got = rows(trail.events, false);
    assert.deepEqual(got, rows(sent.map(segmentStored)));
    const byName = Object.fromEntries(got.map((e) => [e.event, e]));
    assert.deepEqual(
      { plan: byName.signup.properties.plan, n: byName.signup.properties.n, price: byName.signup.properties.price, trial: byName.signup.properties.trial,
        tags: byName.signup.properties.tags, address: byName.signup.properties['address'], amount: byName.purchase.properties.amount,
        page: [byName.$pageview.properties.name, byName.$pageview.properties.category, byName.$pageview.properties.section],
        library: byName.signup.properties['context.library.name'] },
      { plan: 'free', n: 1, price: 9.5, trial: true, tags: '["a","b"]', address: '{"city":"Oslo","zip":"0150"}', amount: 42,
        page: ['Intro', 'Docs', 'start'], library: 'analytics.js' });
    assert.equal(byName.$identify.properties.$anon_distinct_id, anon);
    assert.equal(byName.$create_alias.properties.alias, anon);

    for (const id of [anon, 'user-1']) {
      const person = await getJSON(`api/apps/${app}/persons/${encodeURIComponent(id)}`);
      assert.equal(person.person_id, trail.person_id, `${id} is the person's`);
      assert.deepEqual(person.distinct_ids, trail.distinct_ids);
      assert.deepEqual(person.properties, { email: 'u1@example.com', plan: 'pro' }, 'the identify call\'s traits');
    }
    assert.deepEqual(await trendTotals(app), [5, 1]);
  });
});

// segmentRetry sends two events with analytics-next, the first failed
// with 503 before spur sees it, the second stored by spur and answered
// 503 (failOnce; keep: playwright answers the resends' CORS preflights),
// and checks that analytics-next resends each (at once, 100–600 ms
// later, with X-Retry-Count: 1 and the same messageId and timestamp) and
// that spur stores each once.
async function segmentRetry(app, keep) {
  const key = await createIngestKey(app);
  await withShop('segment.html', { allowed: [failed503, failed503] }, async (shop) => {
    // The Segment.io integration given at load (and the settings too: no
    // settings request).
    const host = new URL(base).host;
    const anon = await loadSegment(shop.tab,
      { writeKey: key, cdnSettings: { integrations: { 'Segment.io': { apiKey: key } } } },
      { integrations: { 'Segment.io': { apiHost: `${host}/ingest/segment/v1`, protocol: 'http' } } });
    const path = /^\/ingest\/segment\/v1\/t$/;
    const lost = failOnce(shop.tab, path, false, keep);
    await shop.tab.evaluate(() => window.ajs.track('first', { k: 1 }));
    assert.equal(await lost, null);
    await shop.settled(2, isSegmentCapture);
    const stored = failOnce(shop.tab, path, true, keep);
    await shop.tab.evaluate(() => window.ajs.track('second', { k: 2 }));
    assert.deepEqual(await stored, { status: 200, body: { success: true } }, 'spur stored the second send');
    const caps = await shop.settled(4, isSegmentCapture);
    assert.equal(shop.wire.filter((w) => w.path.includes('/projects/')).length, 0, 'no settings request');
    assert.deepEqual(caps.map((w) => [w.body.event, w.status, w.headers['x-retry-count'] ?? null]),
      [['first', 503, null], ['first', 200, '1'], ['second', 503, null], ['second', 200, '1']]);
    for (const [a, b] of [[caps[0], caps[1]], [caps[2], caps[3]]]) {
      assert.deepEqual({ ...b.body, sentAt: undefined, _metadata: undefined }, { ...a.body, sentAt: undefined, _metadata: undefined },
        'the resend carries the same message (messageId, timestamp)');
      assert.equal(b.body._metadata.retryCount, 2);
    }
    const trail = await personEvents(app, anon, 2);
    assert.deepEqual(rows(trail.events, false), rows([caps[0].body, caps[2].body].map(segmentStored)));
    assert.deepEqual(await trendTotals(app), [2, 1]);
    await shop.tab.waitForTimeout(1000);
    assert.equal((await personEvents(app, anon, 2)).total, 2, 'no late copy');
  });
}

test('analytics-next: a send answered 503 is resent with the same messageId and stored once, whether spur stored it or not', () =>
  segmentRetry('sdk-segment-retry', true));

// The same with the resends' real CORS preflights: analytics-next adds
// X-Retry-Count to a resend, which spur's preflight answer must allow
// (server/guard.go preflight), else Chromium refuses every resend and an
// event whose first send failed is lost.
test('analytics-next: a resend (X-Retry-Count) passes spur\'s CORS preflight',
  () => segmentRetry('sdk-segment-retry-cors', false));

// With cdnURL at spur analytics-next takes its settings from spur, and
// with them where its usage metrics go: without spur's "metrics":
// {"sampleRate": 0} it would post them every 30 s (its
// "analytics_js.invoke" counters) to its default, https://api.segment.io/v1/m.
test('analytics-next pointed at spur (cdnURL) sends nothing to Segment: no usage metrics to api.segment.io',
  async () => {
    const key = await createIngestKey('sdk-segment-metrics');
    await withShop('segment.html', { clock: true }, async (shop) => {
      await loadSegment(shop.tab, { writeKey: key, cdnURL: base + 'ingest/segment' });
      await shop.tab.evaluate(() => window.ajs.track('signup'));
      await shop.settled(1, isSegmentCapture);
      await shop.tab.clock.runFor(31_000);
      await shop.tab.waitForTimeout(500);
    });
  });
