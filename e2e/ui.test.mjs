// Browser tests of Spur's web UI: a real headless Chromium (Debian's
// package, driven by playwright-core) uses the UI of a `spur serve` over
// the bundled data the way an analyst would — building every analysis
// with every option class through the pickers, clicking numbers for their
// users, saving insights and dashboards, exporting — and checks that
// every number on screen equals the API's answer to the same query,
// written independently here. The analyses of issues 19 and 20 are in
// analyses.test.mjs; the server, browser and helpers in harness.mjs. Run
// through e2e/run.sh, on a new store: the first test signs in through the
// login URL that `spur serve` prints at its first start, and one test
// checks, from a page of another origin, that a browser may send events
// with an ingest key but not query.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import {
  page, base, api, apiGet, fetchAPI, loginURL, adminKey, expectCORSErrors, nf, pct, int, num, RANGE, queryURL, waitResult, runAndWait, urlQuery, shot,
  setFixedRange, drillAndCount, restartServer,
} from './harness.mjs';

test('sign-in: without a key the UI asks for one; the login URL signs in and leaves the address bar', async () => {
  assert.ok(loginURL && adminKey, 'spur serve printed a login URL at its first start');
  await page.goto(base);
  await page.waitForSelector('main.login input[name="key"]');
  await shot('login');
  await page.fill('main.login input[name="key"]', 'spur_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa');
  await page.click('main.login button[type="submit"]');
  await page.waitForSelector('main.login [role="alert"] >> text=unknown API key');
  await page.goto(loginURL);
  await waitResult('trend');
  assert.doesNotMatch(page.url(), /key=|#/, 'the key left the address bar');
  assert.equal(await page.evaluate(() => localStorage.getItem('spur.key')), adminKey);
  // Every API request of the page carried the key; none put it in a URL.
  const seen = [];
  const watch = (r) => { if (r.url().includes('/api/')) seen.push([r.url(), r.headers().authorization]); };
  page.on('request', watch);
  await page.reload();
  await waitResult('trend');
  page.off('request', watch);
  assert.ok(seen.length > 0);
  for (const [u, a] of seen) {
    assert.equal(a, `Bearer ${adminKey}`, u);
    assert.ok(!u.includes(adminKey.slice(5)), u);
  }
});

test('a page of another origin may send events with an ingest key, and may not query', async () => {
  const mkKey = async (scope) => {
    const resp = await fetchAPI('api/keys', { method: 'POST', body: JSON.stringify({ scope, app: 'cardano', name: `e2e ${scope}` }) });
    assert.equal(resp.status, 201);
    return (await resp.json()).key;
  };
  const ingestKey = await mkKey('ingest');
  const queryKey = await mkKey('query');
  // A web app on another origin: localhost on another port (the API is on 127.0.0.1).
  const site = createServer((req, res) => { res.setHeader('Content-Type', 'text/html'); res.end('<!doctype html><title>shop</title><p>shop'); });
  await new Promise((r) => site.listen(0, '127.0.0.1', r));
  const siteURL = `http://localhost:${site.address().port}/`;
  expectCORSErrors(true);
  try {
    await page.goto(siteURL);
    const send = await page.evaluate(async ({ api, key }) => {
      const resp = await fetch(`${api}api/apps/cardano/events`, {
        method: 'POST', headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' },
        body: JSON.stringify([{ user_id: 'e2e-browser', event: 'e2e_cors_event', timestamp: '2021-06-01T10:00:00Z', insert_id: 'e2e-1', properties: { via: 'fetch' } },
          { user_id: 'e2e-browser', event: 'e2e_cors_event', timestamp: 'never' }]),
      });
      return { status: resp.status, body: await resp.json() };
    }, { api: base, key: ingestKey });
    assert.equal(send.status, 200, JSON.stringify(send.body));
    assert.equal(send.body.accepted, 1);
    assert.deepEqual(send.body.rejected.map((r) => [r.index, r.field]), [[1, 'timestamp']]);
    // The ingest key cannot read, even from its own origin's point of view.
    const read = await page.evaluate(async ({ api, key }) => {
      const resp = await fetch(`${api}api/apps/cardano/events`, { method: 'POST', headers: { Authorization: `Bearer ${key}x` }, body: '[]' });
      return resp.status;
    }, { api: base, key: ingestKey });
    assert.equal(read, 401, 'a bad key is refused, readably (CORS headers on the 401)');
    const query = await page.evaluate(async ({ api, key }) => {
      try {
        const resp = await fetch(`${api}api/apps/cardano/query`, { method: 'POST', headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' },
          body: JSON.stringify({ kind: 'trend', range: { from: '2021-05-01', to: '2021-07-01' }, series: [{ event: 'e2e_cors_event' }] }) });
        return `answered ${resp.status}`;
      } catch (e) {
        return `blocked: ${e.name}`;
      }
    }, { api: base, key: queryKey });
    assert.equal(query, 'blocked: TypeError', 'a cross-origin query is refused by the server and the browser');
  } finally {
    expectCORSErrors(false);
    site.close();
  }
  // The event sent from the browser is stored and counted.
  const r = await api({ kind: 'trend', app: 'cardano', range: { from: '2021-05-01', to: '2021-07-01' }, tz: 'UTC', interval: 'month', series: [{ event: 'e2e_cors_event' }] });
  assert.equal(r.series[0].total, 1);
});

test('trend: maths, per-series filters, global filter, breakdown and cohort through the pickers equal the API', async () => {
  await page.goto(base);
  await waitResult('trend');
  assert.match(page.url(), /\/apps\/cardano\/query\?q=/, 'the first app opens on its query page');
  assert.equal(await page.inputValue('#app'), 'cardano');
  const maths = await page.$$eval('[aria-label="Series 1 math"] option', (os) => os.map((o) => o.value));
  assert.deepEqual(maths.sort(), ['avg', 'count', 'count_per_user_avg', 'count_per_user_max', 'count_per_user_median', 'mau', 'max', 'median',
    'min', 'p75', 'p90', 'p95', 'p99', 'sum', 'users', 'wau'], 'the 16 maths of spec §4');
  await setFixedRange(RANGE);
  await page.selectOption('[aria-label="Interval"]', 'week');
  await page.selectOption('[aria-label="Series 1 event"]', 'answer');
  await page.selectOption('[aria-label="Series 1 math"]', 'users');
  await page.click('text=+ Series');
  await page.selectOption('[aria-label="Series 2 event"]', 'badge');
  await page.selectOption('[aria-label="Series 2 math"]', 'p90');
  await page.selectOption('[aria-label="Series 2 property"]', 'event:value');
  // A filter of series 2 only.
  await page.locator('[data-series="1"]').getByText('+ where').click();
  await page.selectOption('[aria-label="Series 2 filter 1 property"]', 'event:detail');
  await page.selectOption('[aria-label="Series 2 filter 1 operator"]', 'neq');
  await page.fill('[aria-label="Series 2 filter 1 value"]', 'Student');
  await page.click('text=+ Series');
  await page.selectOption('[aria-label="Series 3 event"]', '$any');
  await page.selectOption('[aria-label="Series 3 math"]', 'wau');
  // A global filter and a cohort filter.
  await page.click('#builder >> text=+ Filter');
  await page.selectOption('[aria-label="Filter 1 property"]', 'user:reputation');
  await page.selectOption('[aria-label="Filter 1 operator"]', 'gte');
  await page.fill('[aria-label="Filter 1 value"]', '10');
  await page.click('text=+ Cohort filter');
  await page.selectOption('[aria-label="Cohort event"]', 'question');
  await page.fill('[aria-label="Cohort times"]', '1');
  await runAndWait('trend');

  const q = { kind: 'trend', app: 'cardano', range: RANGE, tz: 'UTC', interval: 'week',
    series: [{ event: 'answer', math: 'users' },
      { event: 'badge', math: 'p90', property: 'value', where: [{ property: 'detail', op: 'neq', value: 'Student' }] },
      { event: '$any', math: 'wau' }],
    where: [{ property: 'reputation', op: 'gte', value: 10, source: 'user' }],
    cohort: { performed: { event: 'question' }, count: { op: 'gte', value: 1 } } };
  // What the builder shows is what runs: the URL holds exactly this query.
  const inURL = urlQuery();
  for (const k of Object.keys(q)) assert.deepEqual(inURL[k], q[k], `URL field ${k}`);
  const want = await api(q);
  assert.equal(want.series.length, 3);
  const rows = await page.$$eval('table[data-kind="trend"] tbody tr[data-bucket]',
    (trs) => trs.map((tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent)));
  assert.equal(rows.length, want.series[0].buckets.length);
  rows.forEach((cells, b) => {
    const bk = want.series[0].buckets[b];
    assert.equal(cells[0], bk.start.slice(0, 10) + (bk.incomplete ? '*' : ''), `bucket ${b} label`);
    want.series.forEach((s, i) => assert.equal(cells[i + 1], num(s.buckets[b].value), `bucket ${b} series ${i}`));
  });
  const totals = await page.$$eval('table[data-kind="trend"] td[data-col="total"]', (tds) => tds.map((td) => td.textContent));
  assert.deepEqual(totals, want.series.map((s) => num(s.total)));
  assert.ok(want.series[0].total > 0 && want.series[1].total > 0);
  await shot('trend-options');

  // Breakdown by an event property: legends name the property.
  await page.selectOption('[aria-label="Breakdown property"]', 'event:detail');
  await page.fill('#breakdown-limit', '3');
  await runAndWait('trend');
  const bq = { ...q, breakdown: { property: 'detail', source: 'event', limit: 3 } };
  const bwant = await api(bq);
  const heads = await page.$$eval('table[data-kind="trend"] thead th', (ths) => ths.slice(1).map((th) => th.textContent));
  assert.equal(heads.length, bwant.series.length);
  bwant.series.forEach((s, i) => assert.ok(heads[i].includes(`detail = ${s.breakdown_value}`), `legend ${heads[i]} names the property`));
  await shot('trend-breakdown');
});

test('trend drill-down: a point\'s users are the number clicked, and a user\'s trail opens', async () => {
  const q = { kind: 'trend', app: 'cardano', range: RANGE, tz: 'UTC', interval: 'month',
    series: [{ event: 'answer', math: 'users' }, { event: '$any', math: 'mau' }] };
  await page.goto(queryURL(q));
  await waitResult('trend');
  const want = await api(q);
  const b = want.series[0].buckets.findIndex((x) => x.value > 5);
  const n = await drillAndCount(page.locator(`button[data-series="0"][data-bucket="${b}"]`));
  assert.equal(n, want.series[0].buckets[b].value);
  const inURL = urlQuery();
  assert.deepEqual(inURL.list, { series: 0, bucket: want.series[0].buckets[b].start, limit: 50, offset: 0 });
  // The list is visible in the builder too.
  assert.match(await page.textContent('[data-testid="builder-list"]'), /series A/);
  // The API's own list of the same point is the same users.
  const listed = await api({ ...q, list: { series: 0, bucket: want.series[0].buckets[b].start, limit: 1000 } });
  const ids = await page.$$eval('.userlist tr[data-user]', (trs) => trs.map((tr) => tr.dataset.user));
  assert.deepEqual(ids, listed.list.user_ids.slice(0, 50));
  // mau: the total is not clickable per bucket sum but each point is.
  const m = await drillAndCount(page.locator(`button[data-series="1"][data-bucket="${b}"]`));
  assert.equal(m, want.series[1].buckets[b].value);
  await page.waitForFunction(() => document.querySelector('.userlist td:nth-child(2) .chips'));
  await shot('trend-drilldown');
  // One user's trail: their events in time order, as many as the API has.
  const first = ids[0];
  await page.click(`.userlist tr[data-user="${first}"] a`);
  await page.waitForSelector('[data-testid="trail"]');
  const trail = await apiGet(`api/apps/cardano/users/${encodeURIComponent(first)}/events?limit=1000`);
  const shown = await page.$$eval('[data-testid="trail"] tbody tr', (trs) => trs.length);
  assert.equal(shown, Math.min(100, trail.total));
  const times = await page.$$eval('[data-testid="trail"] td.time', (tds) => tds.map((td) => td.textContent));
  assert.deepEqual(times, [...times].sort(), 'events in time order');
  assert.ok(trail.events.some((e) => e.event === 'answer'), 'the listed user did answer');
  await shot('user-trail');
});

test('funnel: per-step filters, window, breakdown; steps and drop-offs drill down to as many users', async () => {
  await page.goto(queryURL({ kind: 'funnel', app: 'cardano', range: RANGE, tz: 'UTC', steps: [{ event: 'signup' }, { event: 'badge' }], window: '14d' }));
  await waitResult('funnel');
  await page.selectOption('[aria-label="Step 1 event"]', 'signup');
  await page.selectOption('[aria-label="Step 2 event"]', 'question');
  await page.click('text=+ Step');
  await page.selectOption('[aria-label="Step 3 event"]', 'answer');
  await page.locator('[data-step="3"]').getByText('+ where').click();
  await page.selectOption('[aria-label="Step 3 filter 1 property"]', 'event:value');
  await page.selectOption('[aria-label="Step 3 filter 1 operator"]', 'gte');
  await page.fill('[aria-label="Step 3 filter 1 value"]', '0');
  await page.fill('#window-n', '30');
  await page.selectOption('[aria-label="Window unit"]', 'd');
  await runAndWait('funnel');
  const q = { kind: 'funnel', app: 'cardano', range: RANGE, tz: 'UTC',
    steps: [{ event: 'signup' }, { event: 'question' }, { event: 'answer', where: [{ property: 'value', op: 'gte', value: 0 }] }], window: '30d' };
  const inURL = urlQuery();
  for (const k of Object.keys(q)) assert.deepEqual(inURL[k], q[k], `URL field ${k}`);
  const want = await api(q);
  const readSteps = () => page.$$eval('table[data-kind="funnel"] tr[data-step]', (trs) => trs.map((tr) => ({
    users: tr.querySelector('[data-col="users"]').textContent,
    conversion: tr.querySelector('[data-col="conversion"]').textContent,
    fromPrev: tr.querySelector('[data-col="conversion_from_previous"]').textContent,
    dropped: tr.querySelector('[data-col="dropped"]').textContent,
  })));
  const got = await readSteps();
  assert.equal(got.length, 3);
  want.steps.forEach((s, i) => {
    assert.equal(int(got[i].users), s.users, `step ${s.step} users`);
    assert.equal(got[i].conversion, pct(s.conversion), `step ${s.step} conversion`);
    assert.equal(got[i].fromPrev, pct(s.conversion_from_previous));
    if (i < 2) assert.equal(int(got[i].dropped), s.users - want.steps[i + 1].users, `step ${s.step} dropped`);
  });
  await shot('funnel');
  // A step's users and a drop-off's users: as many as shown.
  await drillAndCount(page.locator('table[data-kind="funnel"] tr[data-step="2"] [data-col="users"] button'));
  assert.deepEqual(urlQuery().list, { step: 2, limit: 50, offset: 0 });
  const dropped = await drillAndCount(page.locator('table[data-kind="funnel"] tr[data-step="1"] [data-col="dropped"] button'));
  assert.equal(dropped, want.steps[0].users - want.steps[1].users);
  // Next page of users.
  await page.click('.userlist >> text=Next ›');
  await page.waitForFunction(() => new URL(location.href).searchParams.get('q').includes('"offset":50'));
  await page.waitForSelector('#result:not([aria-busy]) .userlist');
  const page2 = await api({ ...q, list: { step: 1, dropped: true, limit: 50, offset: 50 } });
  const ids = await page.$$eval('.userlist tr[data-user]', (trs) => trs.map((tr) => tr.dataset.user));
  assert.deepEqual(ids, page2.list.user_ids);
  await shot('funnel-dropped-users');

  // Breakdown by a property with bare values: labels name it, and a
  // group's step drills to its users.
  const bq = { ...q, breakdown: { property: 'up_votes', source: 'user', limit: 3 } };
  await page.goto(queryURL(bq));
  await waitResult('funnel');
  const bwant = await api(bq);
  const captions = await page.$$eval('table[data-kind="funnel"] caption', (cs) => cs.map((c) => c.textContent));
  assert.equal(bwant.breakdown.length, 4, 'three values and (other)');
  assert.deepEqual(captions, ['All users', ...bwant.breakdown.map((b) => `up_votes = ${b.value}`)]);
  const g = bwant.breakdown[bwant.breakdown.length - 1];
  const cell = page.locator(`table[data-breakdown="${g.value}"] tr[data-step="1"] [data-col="users"] button`);
  assert.equal(await drillAndCount(cell), g.steps[0].users);
  assert.equal(urlQuery().list.breakdown_value, g.value);
  assert.match(await page.textContent('[data-testid="builder-list"]'), /reached step 1, breakdown/);
  // Both scales: conversion (default with a breakdown) and users.
  await shot('funnel-breakdown');
  await page.click('[aria-label="Funnel scale"] >> text=Users');
  await shot('funnel-breakdown-users');
});

test('retention: every option and a breakdown equal the API; a cell drills down to as many users', async () => {
  await page.goto(queryURL({ kind: 'retention', app: 'cardano', range: { from: '2021-10-04', to: '2021-12-06' }, tz: 'UTC',
    start: { event: 'signup' }, return: { event: '$any' }, period: 'week', periods: 8, type: 'first_time', windows: 'calendar', criterion: 'on' }));
  await waitResult('retention');
  await page.selectOption('[aria-label="Start event"]', 'signup');
  await page.selectOption('[aria-label="Return event"]', 'badge');
  await page.selectOption('[aria-label="Period"]', 'week');
  await page.fill('#periods', '6');
  await page.selectOption('[aria-label="Cohort type"]', 'recurring');
  await page.selectOption('[aria-label="Windows"]', 'rolling');
  await page.selectOption('[aria-label="Criterion"]', 'on_or_after');
  await page.selectOption('[aria-label="Breakdown property"]', 'user:up_votes');
  await page.fill('#breakdown-limit', '2');
  await runAndWait('retention');
  const q = { kind: 'retention', app: 'cardano', range: { from: '2021-10-04', to: '2021-12-06' }, tz: 'UTC', start: { event: 'signup' },
    return: { event: 'badge' }, period: 'week', periods: 6, type: 'recurring', windows: 'rolling', criterion: 'on_or_after',
    breakdown: { property: 'up_votes', source: 'user', limit: 2 } };
  const inURL = urlQuery();
  for (const k of Object.keys(q)) assert.deepEqual(inURL[k], q[k], `URL field ${k}`);
  const want = await api(q);
  const nonEmpty = want.cohorts.filter((c) => c.size > 0);
  const got = await page.$$eval('table[data-kind="retention"] tr[data-cohort]', (trs) => trs.map((tr) => ({
    i: Number(tr.dataset.cohort),
    size: tr.querySelector('[data-col="size"]').textContent,
    cells: [...tr.querySelectorAll('td[data-period]')].map((td) => td.querySelector('.count')?.textContent ?? '–'),
  })));
  assert.equal(got.length, nonEmpty.length, 'empty cohorts are hidden');
  got.forEach((r) => {
    const c = want.cohorts[r.i];
    assert.equal(int(r.size), c.size);
    c.retained.forEach((n, k) => assert.equal(int(r.cells[k]), n, `cohort ${r.i} period ${k}`));
  });
  // A line per breakdown value.
  const lines = await page.evaluate(() => window.Chart.instances && Object.values(window.Chart.instances)[0]?.data.datasets.map((d) => d.label));
  const values = [...new Set(want.cohorts.map((c) => c.breakdown_value))];
  assert.deepEqual(lines, values.map((v) => `up_votes = ${v}`));
  if (want.cohorts.length > nonEmpty.length) {
    await page.click('text=/Show \\d+ empty cohort/');
    assert.equal(await page.$$eval('tr.empty-cohort', (t) => t.length), want.cohorts.length - nonEmpty.length);
  }
  await shot('retention');
  const c = nonEmpty.find((x) => x.retained[1] > 0);
  const i = want.cohorts.indexOf(c);
  const n = await drillAndCount(page.locator(`tr[data-cohort="${i}"] td[data-period="1"] button .count`));
  assert.equal(n, c.retained[1]);
  assert.deepEqual(urlQuery().list, { cohort_start: c.start, period: 1, breakdown_value: c.breakdown_value, limit: 50, offset: 0 });
});

test('cohort builder: the count and users equal the API, paging, save by name, reuse as a filter', async () => {
  await page.click('.kinds button[data-kind="cohort"]');
  await waitResult('cohort');
  await page.click('[aria-label="Date presets"] >> text=All');
  await page.selectOption('[aria-label="Cohort condition"]', 'and');
  await page.selectOption('[aria-label="Cohort.1 event"]', 'answer');
  await page.selectOption('[aria-label="Cohort.1 count"]', 'gte');
  await page.fill('[aria-label="Cohort.1 times"]', '2');
  await page.click('#builder >> text=+ condition');
  await page.selectOption('[aria-label="Cohort.2 condition"]', 'user_property');
  await page.selectOption('[aria-label="Cohort.2 user property property"]', 'user:reputation');
  await page.selectOption('[aria-label="Cohort.2 user property operator"]', 'gte');
  await page.fill('[aria-label="Cohort.2 user property value"]', '100');
  await page.click('#builder >> text=+ condition');
  await page.selectOption('[aria-label="Cohort.3 condition"]', 'not_performed');
  await page.selectOption('[aria-label="Cohort.3 event"]', 'vote_favorite');
  await page.selectOption('[aria-label="Cohort.3 window"]', 'last');
  await page.fill('[aria-label="Cohort.3 days"]', '60');
  await runAndWait('cohort');
  const cohort = { and: [{ performed: { event: 'answer' }, count: { op: 'gte', value: 2 } },
    { user_property: { property: 'reputation', op: 'gte', value: 100 } },
    { not_performed: { event: 'vote_favorite' }, window: { last_days: 60 } }] };
  const q = urlQuery();
  assert.deepEqual(q.cohort, cohort);
  const want = await api({ ...q });
  assert.ok(want.users > 50, `${want.users} users`);
  assert.equal(int(await page.textContent('[data-testid="cohort-size"] .n')), want.users);
  assert.equal(int(await page.textContent('[data-testid="list-count"]')), want.users);
  const ids = await page.$$eval('.userlist tr[data-user]', (trs) => trs.map((tr) => tr.dataset.user));
  assert.deepEqual(ids, want.user_ids);
  await page.click('.userlist >> text=Next ›');
  await page.waitForFunction(() => new URL(location.href).searchParams.get('q').includes('"offset":50'));
  await waitResult('cohort');
  const p2 = await api({ ...q, list: { limit: 50, offset: 50 } });
  assert.deepEqual(await page.$$eval('.userlist tr[data-user]', (trs) => trs.map((tr) => tr.dataset.user)), p2.user_ids);
  await shot('cohort-builder');
  // Save it by name; the cohorts page counts it; a trend filters by it.
  await page.fill('[aria-label="Cohort name"]', 'engaged_answerers');
  await page.click('text=Save cohort');
  await page.waitForSelector('text=Saved as "engaged_answerers"');
  await page.click('nav.sections >> text=Cohorts');
  await page.waitForSelector('[data-testid="cohorts"] tr[data-name="engaged_answerers"]');
  await page.waitForFunction((n) => document.querySelector('tr[data-name="engaged_answerers"] td.num').textContent === n, nf.format(want.users));
  await shot('cohorts-page');
  const tq = { kind: 'trend', app: 'cardano', range: RANGE, tz: 'UTC', interval: 'month', series: [{ event: '$any', math: 'users' }], cohort: 'engaged_answerers' };
  await page.goto(queryURL(tq));
  await waitResult('trend');
  assert.equal(await page.inputValue('[aria-label="Cohort saved cohort"]'), 'engaged_answerers', 'a link\'s saved cohort shows in the builder');
  const tw = await api(tq);
  assert.equal(tw.series[0].total, want.users, 'everyone in the cohort did something in the range');
});

test('a link round-trips: p90, per-series filters, cohort and list show in the builder and run as given', async () => {
  const q = { kind: 'trend', app: 'cardano', range: { from: '2021-05-01', to: '2021-08-01' }, tz: 'Asia/Tokyo', interval: 'week', week_start: 'sunday',
    series: [{ event: 'badge', math: 'p90', property: 'value', where: [{ property: 'detail', op: 'in', value: ['Informed', 'Student'] }] }, { event: 'answer', math: 'users' }],
    cohort: { or: [{ first_performed: { event: 'signup' }, window: { from: '2021-05-01', to: '2021-06-01' } }, { not: { performed: { event: 'comment' } } }] },
    list: { series: 1, limit: 20, offset: 0 } };
  await page.goto(queryURL(q));
  await waitResult('trend');
  assert.deepEqual(urlQuery(), q, 'the URL is not rewritten');
  assert.equal(await page.inputValue('[aria-label="Series 1 math"]'), 'p90');
  assert.equal(await page.inputValue('[aria-label="Series 1 property"]'), 'event:value');
  assert.equal(await page.inputValue('[aria-label="Series 1 filter 1 operator"]'), 'in');
  assert.equal(await page.inputValue('[aria-label="Series 1 filter 1 value"]'), 'Informed, Student');
  assert.equal(await page.inputValue('#tz'), 'Asia/Tokyo');
  assert.equal(await page.inputValue('[aria-label="Week start"]'), 'sunday');
  assert.equal(await page.inputValue('[aria-label="Cohort condition"]'), 'or');
  assert.equal(await page.inputValue('[aria-label="Cohort.1 condition"]'), 'first_performed');
  assert.equal(await page.inputValue('[aria-label="Cohort.1 from"]'), '2021-05-01');
  assert.equal(await page.inputValue('[aria-label="Cohort.2 condition"]'), 'not');
  assert.match(await page.textContent('[data-testid="builder-list"]'), /series B/);
  const want = await api(q);
  assert.equal(int(await page.textContent('[data-testid="list-count"]')), want.list.users);
  assert.equal(want.list.users, want.series[1].total, 'the range total of a users series lists its users');
  // The JSON editor shows the query as it runs.
  await page.click('text=Query JSON');
  assert.deepEqual(JSON.parse(await page.inputValue('[aria-label="Query JSON"]')), q);
  // Running again from the builder runs the same query.
  await page.click('#run');
  await waitResult('trend');
  assert.deepEqual(urlQuery(), q);
  await shot('link-roundtrip');
});

test('CSV export equals the JSON answer; PNG export is a PNG', async () => {
  const q = { kind: 'funnel', app: 'cardano', range: RANGE, tz: 'UTC', steps: [{ event: 'signup' }, { event: 'question' }, { event: 'answer' }],
    window: '30d', breakdown: { property: 'value', limit: 2 } };
  await page.goto(queryURL(q));
  await waitResult('funnel');
  const [csvDl] = await Promise.all([page.waitForEvent('download'), page.click('#result .toolbar >> text=CSV')]);
  assert.equal(csvDl.suggestedFilename(), 'spur-funnel.csv');
  const csv = readFileSync(await csvDl.path(), 'utf8').trim().split('\n').map((l) => l.split(','));
  const want = await api(q);
  assert.deepEqual(csv[0], ['breakdown_value', 'step', 'label', 'event', 'users', 'conversion', 'conversion_from_previous', 'avg_seconds', 'median_seconds']);
  const rows = [...want.steps.map((s) => ['', s]), ...want.breakdown.flatMap((b) => b.steps.map((s) => [b.value, s]))];
  assert.equal(csv.length - 1, rows.length);
  rows.forEach(([bv, s], i) => {
    const r = csv[i + 1];
    assert.deepEqual([r[0], Number(r[1]), r[2], r[3], Number(r[4]), Number(r[5]), Number(r[6])],
      [bv, s.step, s.label, s.event, s.users, s.conversion, s.conversion_from_previous], `CSV row ${i + 1}`);
    assert.equal(r[7] === '' ? null : Number(r[7]), s.avg_seconds);
  });
  const [pngDl] = await Promise.all([page.waitForEvent('download'), page.click('#result .toolbar >> text=PNG')]);
  assert.equal(pngDl.suggestedFilename(), 'spur-funnel.png');
  const png = readFileSync(await pngDl.path());
  assert.deepEqual([...png.subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a], 'PNG signature');
  assert.ok(png.length > 5000, `${png.length} bytes`);
});

test('a saved insight on a dashboard survives a server restart', async () => {
  const q = { kind: 'trend', app: 'cardano', range: RANGE, tz: 'UTC', interval: 'month', series: [{ event: 'signup', math: 'count' }] };
  await page.goto(queryURL(q));
  await waitResult('trend');
  await page.click('#save-insight');
  await page.fill('[aria-label="Insight name"]', 'Monthly signups');
  await page.click('[role="dialog"] >> text=Save');
  await page.waitForSelector('text=Saved "Monthly signups" (version 1)');
  const id = new URL(page.url()).searchParams.get('insight');
  assert.ok(id, 'the URL names the saved insight');
  await page.click('nav.sections >> text=Dashboards');
  await page.fill('[aria-label="Dashboard name"]', 'Growth');
  await page.click('text=Create dashboard');
  await page.waitForSelector('h1:has-text("Growth")');
  await page.selectOption('[aria-label="Insight to add"]', id);
  await page.click('text=Add tile');
  await page.waitForSelector(`.tile[data-insight="${id}"] [data-testid="tile-age"]`);
  const want = await api(q);
  const checkTile = async () => {
    await page.waitForSelector(`.tile[data-insight="${id}"] [data-testid="tile-age"]`);
    const pts = await page.evaluate(() => Object.values(window.Chart.instances)[0].data.datasets[0].data);
    assert.deepEqual(pts, want.series[0].buckets.map((b) => b.value));
  };
  await checkTile();
  // A second visit is served from the cache, with its age.
  await page.reload();
  await checkTile();
  assert.match(await page.textContent('[data-testid="tile-age"]'), /^cached \d+ s ago/);
  await shot('dashboard');
  const dashURL = new URL(page.url()).pathname;

  await restartServer();
  await page.goto(base + dashURL.slice(1));
  await checkTile();
  assert.match(await page.textContent('[data-testid="tile-age"]'), /^computed \d+ s ago/, 'a new process computes it afresh');
  await page.click('nav.sections >> text=Insights');
  await page.waitForSelector(`[data-testid="insights"] tr[data-id="${id}"]`);
  await shot('insights-after-restart');
});

test('date presets are relative ranges, the zone picker sets tz, and an hourly trend over months is coarsened', async () => {
  const q = { kind: 'trend', app: 'cardano', range: { from: '2021-05-01', to: '2021-12-01' }, tz: 'UTC', interval: 'hour', series: [{ event: 'badge', math: 'count' }] };
  await page.goto(queryURL(q));
  await waitResult('trend');
  assert.equal(urlQuery().interval, 'day', 'coarsened to day');
  assert.match(await page.textContent('[data-testid="coarsened"]'), /hour chart over this range would draw [\d,]+ points/);
  assert.equal(await page.inputValue('[aria-label="Interval"]'), 'day', 'the builder shows the interval that runs');
  await shot('coarsened');
  await page.click('[data-testid="coarsened"] >> text=Keep hour');
  await waitResult('trend');
  assert.equal(urlQuery().interval, 'hour');
  assert.ok((await page.$$eval('table[data-kind="trend"] tr[data-bucket]', (t) => t.length)) > 5000);

  await page.goto(queryURL({ ...q, interval: 'week' }));
  await waitResult('trend');
  await page.selectOption('#tz', 'Asia/Tokyo');
  await runAndWait('trend');
  assert.equal(urlQuery().tz, 'Asia/Tokyo');
  const tokyo = await api({ ...q, interval: 'week', tz: 'Asia/Tokyo' });
  assert.equal(await page.textContent('table[data-kind="trend"] tr[data-bucket="0"] td'), tokyo.series[0].buckets[0].start.slice(0, 10));

  await page.click('[aria-label="Date presets"] >> text=30d');
  await page.click('#run');
  await waitResult('trend');
  assert.deepEqual(urlQuery().range, { last: '30d' }, 'a preset is a relative range');
});

test('a running query can be cancelled, and result warnings are shown', async () => {
  const q = { kind: 'trend', app: 'cardano', range: RANGE, tz: 'UTC', interval: 'week', series: [{ event: 'answer', math: 'count' }] };
  // Hold the query request, so that it is still running when Cancel is pressed.
  let release;
  const held = new Promise((r) => { release = r; });
  await page.route('**/api/apps/cardano/query', async (route) => { await held; await route.continue().catch(() => {}); });
  await page.goto(queryURL(q));
  await page.waitForSelector('#cancel');
  assert.equal(await page.getAttribute('#result', 'aria-busy'), 'true');
  await page.click('#cancel');
  await page.waitForSelector('text=Cancelled.');
  await page.waitForSelector('#run');
  release();
  await page.unroute('**/api/apps/cardano/query');
  await shot('cancelled');
  // Warnings of a result (spec §9 [{code, message, field}]) are listed.
  await page.route('**/api/apps/cardano/query', async (route) => {
    const resp = await route.fetch();
    const body = await resp.json();
    body.warnings = [{ code: 'unknown_event', message: 'event "answr" is seen nowhere in app "cardano"', field: 'series[0].event' }];
    await route.fulfill({ response: resp, json: body });
  });
  await page.click('#run');
  await page.waitForSelector('ul.warnings li[data-code="unknown_event"]');
  assert.match(await page.textContent('ul.warnings'), /series\[0\]\.event.*seen nowhere/);
  await page.unroute('**/api/apps/cardano/query');
  await shot('warnings');
});

test('a bad query shows the API error', async () => {
  await page.goto(queryURL({ kind: 'funnel', app: 'cardano', range: { from: '2021-06-01', to: '2021-05-01' }, steps: [{ event: 'signup' }, { event: 'answer' }] }));
  const alert = await page.waitForSelector('#result [role="alert"]');
  const text = await alert.textContent();
  assert.match(text, /invalid_query/);
  assert.match(text, /range/);
  await shot('error');
});

test('phone width (420 px): nothing overflows and Run is fully visible', async () => {
  await page.setViewportSize({ width: 420, height: 900 });
  try {
    for (const q of [
      { kind: 'funnel', app: 'cardano', range: RANGE, tz: 'UTC', steps: [{ event: 'signup' }, { event: 'question' }, { event: 'answer' }], window: '30d', breakdown: { property: 'value', limit: 3 } },
      { kind: 'retention', app: 'cardano', range: { from: '2021-10-04', to: '2021-12-06' }, tz: 'UTC', start: { event: 'signup' }, period: 'week', periods: 8 },
    ]) {
      await page.goto(queryURL(q));
      await waitResult(q.kind);
      const width = await page.evaluate(() => document.documentElement.scrollWidth);
      assert.ok(width <= 420, `${q.kind}: page is ${width} px wide`);
      const run = await page.locator('#run').boundingBox();
      assert.ok(run.x >= 0 && run.x + run.width <= 420, `Run button at ${run.x}+${run.width}`);
      await shot(`phone-${q.kind}`);
    }
  } finally {
    await page.setViewportSize({ width: 1400, height: 1000 });
  }
});

// Persons (identity.md, issue 27): run.sh imports persons.ndjson as the
// app "people": alice is one person of three distinct ids (alice, and
// anon-1 and anon-2 identified into it), bob of two (bob, anon-3), carol
// of one; bob's later identify of anon-1 (already alice's, who is
// identified) is the one refused merge.
const PEOPLE = { from: '2021-05-31', to: '2021-06-07' };
const PEOPLE_FUNNEL = { kind: 'funnel', app: 'people', range: PEOPLE, tz: 'UTC', steps: [{ event: 'page_view' }, { event: 'signup' }, { event: 'purchase' }], window: '7d' };
const idsHint = (ids, id) => {
  const n = ids.filter((d) => d !== id).length;
  return ids.length > 1 ? { hint: `+${n} id${n === 1 ? '' : 's'}`, title: ids.join(', ') } : { hint: null, title: null };
};

test('persons: a list shows person ids, each linking to its page, with a "+N ids" hint naming its distinct ids', async () => {
  await page.goto(queryURL(PEOPLE_FUNNEL));
  await waitResult('funnel');
  const want = await api(PEOPLE_FUNNEL);
  assert.deepEqual(want.steps.map((s) => s.users), [3, 3, 1], 'counted by persons: alice viewed as anon-1 and bought as alice, on another device');
  await drillAndCount(page.locator('table[data-kind="funnel"] tr[data-step="1"] [data-col="users"] button'));
  assert.deepEqual(urlQuery().list, { step: 1, limit: 50, offset: 0 }, 'the link keeps the query as written');
  const listed = await api({ ...PEOPLE_FUNNEL, list: { step: 1, limit: 50, distinct_ids: true } });
  assert.deepEqual(listed.list.user_ids, [{ id: 'alice', distinct_ids: ['alice', 'anon-1', 'anon-2'] }, { id: 'bob', distinct_ids: ['anon-3', 'bob'] },
    { id: 'carol', distinct_ids: ['carol'] }]);
  const rows = await page.$$eval('.userlist tr[data-user]', (trs) => trs.map((tr) => {
    const h = tr.querySelector('[data-testid="ids-hint"]');
    return { id: tr.dataset.user, href: tr.querySelector('a').getAttribute('href'), hint: h?.textContent ?? null, title: h?.getAttribute('title') ?? null };
  }));
  assert.deepEqual(rows, listed.list.user_ids.map((p) => ({ id: p.id, href: `/apps/people/persons/${p.id}`, ...idsHint(p.distinct_ids, p.id) })));
  await shot('persons-list');
  await page.click('.userlist tr[data-user="bob"] a');
  await page.waitForSelector('[data-testid="trail"]');
  assert.equal(new URL(page.url()).pathname, '/apps/people/persons/bob');
});

// The assertions of the next two tests read the person endpoints' final
// shapes (person_id, distinct_ids, each event's distinct_id; GET
// /warnings?kind=identity): they pass once the server's persons endpoints
// (branch waysin) are merged, not before.
test('persons: the page of any distinct id shows the person id, all of its ids (that one marked) and one merged trail', async () => {
  const person = await apiGet('api/apps/people/persons/anon-1');
  assert.equal(person.person_id, 'alice');
  assert.deepEqual(person.distinct_ids, ['alice', 'anon-1', 'anon-2']);
  const trail = await apiGet('api/apps/people/persons/anon-1/events?limit=1000');
  assert.equal(trail.total, 7, 'anon-1\'s 2 events, alice\'s 4 and anon-2\'s 1');
  assert.deepEqual([...new Set(trail.events.map((e) => e.distinct_id))].sort(), person.distinct_ids);
  const check = async (id) => {
    await page.waitForSelector(`[data-testid="distinct-ids"] [data-id="${id}"][aria-current="true"]`);
    await page.waitForSelector('[data-testid="trail"]');
    assert.equal(await page.textContent('[data-testid="person-id"]'), 'alice');
    assert.deepEqual(await page.$$eval('[data-testid="distinct-ids"] [data-id]', (els) => els.map((e) => [e.dataset.id, e.getAttribute('aria-current')])),
      person.distinct_ids.map((d) => [d, d === id ? 'true' : null]));
    assert.deepEqual(await page.$$eval('[data-testid="trail"] thead th', (ths) => ths.map((th) => th.textContent.replace(/ \(.*\)$/, ''))),
      ['#', 'Time', 'Distinct id', 'Event', 'Properties']);
    const shown = await page.$$eval('[data-testid="trail"] tbody tr', (trs) => trs.map((tr) => [...tr.children].slice(1, 4).map((td) => td.textContent)));
    assert.deepEqual(shown, trail.events.map((e) => [e.time.replace('T', ' '), e.distinct_id, e.event]), 'one trail of all three ids in time order');
  };
  await page.goto(`${base}apps/people/persons/anon-1`);
  await check('anon-1');
  await shot('person');
  // Another of its ids opens the same person, that id marked.
  await page.click('[data-testid="distinct-ids"] a[data-id="anon-2"]');
  await check('anon-2');
  // The older address is the same page.
  await page.goto(`${base}apps/people/users/anon-1`);
  await check('anon-1');
  // A person of one id: no list of ids, no distinct id column.
  await page.goto(`${base}apps/people/persons/carol`);
  await page.waitForSelector('[data-testid="trail"] tbody tr');
  assert.equal(await page.textContent('[data-testid="person-id"]'), 'carol');
  assert.equal(await page.locator('[data-testid="distinct-ids"]').count(), 0);
  assert.deepEqual(await page.$$eval('[data-testid="trail"] tbody tr', (trs) => trs.map((tr) => tr.children.length)), [4, 4]);
});

test('persons: the refused merges page lists the refusals with their ids, and the total', async () => {
  const want = await apiGet('api/apps/people/warnings?kind=identity');
  assert.equal(want.total, 1);
  assert.deepEqual(want.warnings.map((w) => [w.op, w.ids]), [['identify', ['bob', 'anon-1']]]);
  await page.goto(`${base}apps/people/query`);
  await waitResult('trend');
  await page.click('nav.sections >> text=Persons');
  await page.waitForSelector('[data-testid="refused"] tbody tr');
  assert.equal(new URL(page.url()).pathname, '/apps/people/persons');
  assert.equal(await page.textContent('[data-testid="refused-total"]'), String(want.total));
  const rows = await page.$$eval('[data-testid="refused"] tbody tr', (trs) => trs.map((tr) => ({
    seq: Number(tr.dataset.seq), time: tr.querySelector('.time').textContent, op: tr.querySelector('[data-col="op"]').textContent,
    ids: [...tr.querySelectorAll('[data-col="ids"] a')].map((a) => [a.textContent, a.getAttribute('href')]), reason: tr.querySelector('[data-col="reason"]').textContent })));
  assert.deepEqual(rows, want.warnings.map((w) => ({ seq: w.seq, time: w.time.replace('T', ' ').replace('Z', ''), op: w.op,
    ids: w.ids.map((id) => [id, `/apps/people/persons/${id}`]), reason: w.reason })));
  await shot('persons-refused');
  // An id of a refusal opens its person: anon-1 stayed alice's.
  await page.click('[data-testid="refused"] [data-col="ids"] a[data-id="anon-1"]');
  await page.waitForSelector('[data-testid="distinct-ids"] [data-id="anon-1"][aria-current="true"]');
  assert.equal(await page.textContent('[data-testid="person-id"]'), 'alice');
  // Both pages fit a phone.
  await page.setViewportSize({ width: 420, height: 900 });
  try {
    for (const path of ['apps/people/persons', 'apps/people/persons/anon-1']) {
      await page.goto(base + path);
      await page.waitForSelector('[data-testid="refused"], [data-testid="trail"]');
      const width = await page.evaluate(() => document.documentElement.scrollWidth);
      assert.ok(width <= 420, `${path}: page is ${width} px wide`);
      await shot(`phone-${path.replaceAll('/', '-')}`);
    }
  } finally {
    await page.setViewportSize({ width: 1400, height: 1000 });
  }
});

test('line charts draw straight lines between their points (no smoothing that overshoots), on the query page and on tiles', async () => {
  const lines = () => page.evaluate(() => Object.values(window.Chart.instances).filter((c) => c.config.type === 'line')
    .flatMap((c) => c.data.datasets.map((d, i) => {
      const o = c.getDatasetMeta(i).dataset.options;
      return `${d.label}: tension ${o.tension}, ${o.cubicInterpolationMode}`;
    })));
  const straight = (got, what) => {
    assert.ok(got.length > 0, `${what} draws lines`);
    for (const l of got) assert.match(l, /: tension 0, default$/, what);
  };
  for (const [q, kind] of [
    [{ kind: 'trend', app: 'cardano', range: RANGE, tz: 'UTC', interval: 'month', series: [{ event: 'answer', math: 'users' }, { event: 'question' }], formula: 'A / B', compare: 'previous' }, 'trend'],
    [{ kind: 'funnel', app: 'cardano', range: RANGE, tz: 'UTC', steps: [{ event: 'signup' }, { event: 'comment' }], window: '14d', view: 'trends', interval: 'month' }, 'funnel-trends'],
    [{ kind: 'retention', app: 'cardano', range: { from: '2021-10-04', to: '2021-12-06' }, tz: 'UTC', start: { event: 'signup' }, period: 'week', periods: 8 }, 'retention'],
  ]) {
    await page.goto(queryURL(q));
    await waitResult(kind);
    straight(await lines(), `${q.kind} ${q.view || ''}`);
  }
  const post = async (path, body) => {
    const r = await fetchAPI(path, { method: 'POST', body: JSON.stringify(body) });
    assert.equal(r.status, 201, path);
    return r.json();
  };
  const ins = await post('api/apps/cardano/insights', { name: 'Weekly answerers', query: { kind: 'trend', range: RANGE, tz: 'UTC', interval: 'week', series: [{ event: 'answer', math: 'users' }] } });
  const dash = await post('api/apps/cardano/dashboards', { name: 'Lines', tiles: [{ insight: ins.id }] });
  await page.goto(`${base}apps/cardano/dashboards/${dash.id}`);
  await page.waitForSelector(`.tile[data-insight="${ins.id}"] [data-testid="tile-age"]`);
  straight(await lines(), 'a dashboard tile');
});

test('SDKs: the app page shows each SDK\'s snippet pointing at this server; a new ingest key, shown once, fills them in', async () => {
  const origin = base.replace(/\/$/, '');
  await page.goto(`${base}apps/cardano/query`);
  await waitResult('trend');
  await page.click('nav.sections >> text=SDKs');
  await page.waitForSelector('section.snippet[data-sdk="posthog-js"] pre');
  const snippets = async () => page.$$eval('section.snippet', (ss) => Object.fromEntries(ss.map((s) => [s.dataset.sdk, s.querySelector('pre').textContent])));
  const want = (await apiGet(`api/apps/cardano/sdk-snippets?base=${encodeURIComponent(origin)}`)).snippets;
  assert.deepEqual(await snippets(), Object.fromEntries(want.map((s) => [s.sdk, s.code])), 'the server\'s text, for the page\'s origin');
  assert.ok((await snippets())['posthog-js'].includes(`api_host: '${origin}/ingest/posthog'`));
  await shot('sdks');
  await page.click('main.sdks-page button >> text=Create an ingest key');
  const key = (await page.textContent('[data-testid="new-key"] code')).trim();
  assert.match(key, /^spur_[a-z2-7]{32}$/);
  const got = await snippets();
  for (const s of want) assert.ok(got[s.sdk].includes(key) && !got[s.sdk].includes('YOUR_SPUR_INGEST_KEY'), s.sdk);
  const who = await (await fetch(`${base}api/key`, { headers: { Authorization: `Bearer ${key}` } })).json();
  assert.deepEqual([who.scope, who.app], ['ingest', 'cardano']);
  // Shown once: the page opened again holds the placeholder.
  await page.reload();
  await page.waitForSelector('section.snippet[data-sdk="posthog-js"] pre');
  assert.ok(!(await page.content()).includes(key));
});

test('Admin, deletions: erasing a person asks for its id typed again, lists the request pending, and its events are gone', async () => {
  const app = 'e2e-erase';
  let resp = await fetchAPI('api/keys', { method: 'POST', body: JSON.stringify({ scope: 'ingest', app }) });
  const { key } = await resp.json();
  const send = (evs) => fetch(`${base}api/apps/${app}/events`, { method: 'POST', headers: { Authorization: `Bearer ${key}` }, body: JSON.stringify(evs) });
  resp = await send([{ user_id: 'e2e-anon', event: 'view', timestamp: '2026-01-01T10:00:00Z' },
    { user_id: 'e2e-user', anonymous_id: 'e2e-anon', event: 'signup', timestamp: '2026-01-01T10:05:00Z', user_properties: { plan: 'pro' } },
    { user_id: 'e2e-user', event: 'view', timestamp: '2026-01-01T11:00:00Z' },
    { user_id: 'e2e-other', event: 'view', timestamp: '2026-01-01T12:00:00Z' }]);
  assert.equal(resp.status, 200);
  const views = { kind: 'trend', app, range: { from: '2026-01-01', to: '2026-01-02' }, tz: 'UTC', interval: 'day', series: [{ event: 'view', math: 'users' }, { event: '$any' }] };
  assert.deepEqual((await api(views)).series.map((s) => s.total), [2, 4]);
  const rows = () => page.$$eval('[data-testid="deletions"] tbody tr', (trs) => trs.map((tr) => Object.fromEntries(
    [['id', tr.dataset.id], ...[...tr.querySelectorAll('[data-col]')].map((td) => [td.dataset.col, td.textContent])])));
  const want = async () => (await apiGet(`api/apps/${app}/deletions`)).deletions.reverse().map((d) => ({ id: d.id, kind: d.kind,
    requested: d.requested_at.replace('T', ' ').replace(/(\.\d+)?Z$/, ''), status: d.status, done: '–', suppress: d.suppress ? 'yes' : '' }));

  await page.goto(`${base}apps/${app}/admin`);
  await page.waitForSelector('section.deletions p.empty');
  const form = 'section.erase-person';
  // By the anonymous id: the whole person (both ids) goes.
  await page.fill(`${form} input[aria-label="Distinct id to erase"]`, 'e2e-anon');
  await page.click(`${form} button >> text=Erase…`);
  const confirm = `${form} button >> text=Erase the person`;
  assert.equal(await page.textContent('[data-testid="erase-id"]'), 'e2e-anon');
  assert.ok(await page.isDisabled(confirm), 'enabled before the id is typed again');
  await page.fill(`${form} input[aria-label="Distinct id to confirm"]`, 'e2e-user');
  assert.ok(await page.isDisabled(confirm), 'enabled by another id (of the same person)');
  // Cancel leaves nothing requested, and the form keeps the id.
  await page.click(`${form} button >> text=Cancel`);
  assert.equal(await page.inputValue(`${form} input[aria-label="Distinct id to erase"]`), 'e2e-anon');
  assert.deepEqual((await apiGet(`api/apps/${app}/deletions`)).deletions, []);
  await page.click(`${form} button >> text=Erase…`);
  await page.fill(`${form} input[aria-label="Distinct id to confirm"]`, 'e2e-anon');
  await shot('admin-erase-confirm');
  await page.click(confirm);
  await page.waitForSelector('[data-testid="erase-made"]');
  await page.waitForSelector('[data-testid="deletions"] tbody tr');
  let got = await want();
  assert.equal(got.length, 1);
  assert.deepEqual(await rows(), got);
  assert.equal(got[0].status, 'pending');
  assert.match(got[0].id, /^del-/);
  assert.ok((await page.textContent('[data-testid="erase-made"]')).includes(got[0].id));
  assert.ok(!(await page.textContent('[data-testid="deletions"]')).includes('e2e-'), 'the list names no erased id');
  assert.equal(await page.inputValue(`${form} input[aria-label="Distinct id to erase"]`), '', 'the form is emptied');
  // Gone from every query at once: the other user's events only.
  assert.deepEqual((await api(views)).series.map((s) => s.total), [1, 1]);
  await page.goto(`${base}apps/${app}/persons/e2e-user`);
  await page.waitForSelector('[data-testid="trail"]');
  assert.equal(await page.locator('[data-testid="trail"] tbody tr').count(), 0, 'the person page shows no event');
  assert.ok((await page.textContent('main.person-page')).includes('No person properties.'));
  // With suppress: the newest request first, marked.
  await page.goto(`${base}apps/${app}/admin`);
  await page.waitForSelector('[data-testid="deletions"] tbody tr');
  await page.fill(`${form} input[aria-label="Distinct id to erase"]`, 'e2e-other');
  await page.check(`${form} input[aria-label="Suppress"]`);
  await page.click(`${form} button >> text=Erase…`);
  await page.fill(`${form} input[aria-label="Distinct id to confirm"]`, 'e2e-other');
  await page.click(confirm);
  await page.waitForSelector('[data-testid="deletions"] tbody tr:nth-child(2)');
  got = await want();
  assert.deepEqual(await rows(), got);
  assert.deepEqual(got.map((d) => [d.status, d.suppress]), [['pending', 'yes'], ['pending', '']]);
  await shot('admin-deletions');
  assert.deepEqual((await api(views)).series.map((s) => s.total), [0, 0]);
  resp = await send([{ user_id: 'e2e-other', event: 'view', timestamp: '2026-01-01T13:00:00Z' }]);
  assert.equal(resp.status, 200);
  assert.deepEqual((await api(views)).series.map((s) => s.total), [0, 0], 'a suppressed id\'s later events are dropped');
});

test('Admin: the app\'s size, and deleting an app asks for its name typed, then removes it and its keys', async () => {
  // A throwaway app, with an ingest key.
  let resp = await fetchAPI('api/keys', { method: 'POST', body: JSON.stringify({ scope: 'ingest', app: 'e2e-doomed' }) });
  const { key } = await resp.json();
  resp = await fetch(`${base}api/apps/e2e-doomed/events`, { method: 'POST', headers: { Authorization: `Bearer ${key}` },
    body: JSON.stringify([{ user_id: 'u', event: 'e', timestamp: '2026-01-01T00:00:00Z' }, { user_id: 'v', event: 'e', timestamp: '2026-01-02T00:00:00Z' }]) });
  assert.equal(resp.status, 200);
  await page.goto(`${base}apps/e2e-doomed/admin`);
  await page.waitForSelector('main.admin-page [data-testid="events"]');
  assert.equal((await page.textContent('[data-testid="events"]')).trim(), '2', 'live events counted');
  await shot('admin');
  const button = 'main.admin-page button.danger';
  assert.ok(await page.isDisabled(button), 'enabled before the name is typed');
  await page.fill('input[aria-label="App name to confirm"]', 'e2e-doome');
  assert.ok(await page.isDisabled(button), 'enabled by a wrong name');
  await page.fill('input[aria-label="App name to confirm"]', 'e2e-doomed');
  await page.click(button);
  await page.waitForURL((u) => !u.pathname.includes('e2e-doomed'));
  const apps = (await apiGet('api/apps')).apps.map((a) => a.name);
  assert.ok(!apps.includes('e2e-doomed') && apps.includes('cardano'), apps.join(','));
  resp = await fetch(`${base}api/apps/e2e-doomed/events`, { method: 'POST', headers: { Authorization: `Bearer ${key}` }, body: '[]' });
  assert.equal(resp.status, 401, 'the app\'s key is revoked');
});
