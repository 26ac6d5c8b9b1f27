// Browser tests of the UI of issues 19 and 20: funnel orders, exclusions
// and views, trend formulas and comparison, relative ranges, and the
// stickiness, lifecycle, paths and attribution analyses. Each is built
// through the builder's controls (or opened from a link), its numbers and
// chart compared with the API's answer to the same query, and its numbers
// and chart elements clicked for their users: as many as the number
// says. Cardano (the demo's real data) and the generator's app "shop"
// (attribution needs touchpoints). Run through e2e/run.sh.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import {
  page, base, api, apiGet, fetchAPI, pct, int, num, RANGE, queryURL, waitResult, runAndWait, urlQuery, shot, setFixedRange,
  drillAndCount, clickChart, chartData, clickForList, waitShown,
} from './harness.mjs';

const SHOP = { from: '2024-02-01', to: '2024-03-01' };

// readTable returns the text of every cell of the rows matched by sel.
const readTable = (sel) => page.$$eval(sel, (trs) => trs.map((tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent.trim())));

// sameQuery asserts that the URL's query is q, exactly.
const sameQuery = (q, msg) => assert.deepEqual(urlQuery(), q, msg || 'the URL holds the query the builder shows');

const stepUsers = () => page.$$eval('table[data-kind="funnel"]:not([data-breakdown]) tr[data-step]',
  (trs) => trs.map((tr) => [tr.children[1].textContent, tr.querySelector('[data-col="users"]').textContent]));

test('funnel: exclusions and each order through the controls equal the API; a step drills to as many users', async () => {
  const start = { kind: 'funnel', app: 'cardano', range: RANGE, tz: 'UTC', steps: [{ event: 'signup' }, { event: 'answer' }], window: '30d' };
  await page.goto(queryURL(start));
  await waitResult('funnel');
  await page.click('text=+ Exclusion');
  await page.selectOption('[aria-label="Exclusion 1 event"]', 'question');
  await page.selectOption('[aria-label="Exclusion 1 from step"]', '1');
  await page.selectOption('[aria-label="Exclusion 1 to step"]', '2');
  await runAndWait('funnel');
  const q = { ...start, exclusions: [{ event: 'question', from_step: 1, to_step: 2 }] };
  sameQuery(q);
  const [plain, want] = [await api(start), await api(q)];
  assert.ok(want.steps[0].users < plain.steps[0].users, 'excluded users leave step 1 too');
  assert.deepEqual(await stepUsers(), want.steps.map((s) => [s.event, num(s.users)]));
  assert.match(await page.textContent('#result .note'), /excluding attempts with question/);
  await drillAndCount(page.locator('table[data-kind="funnel"] tr[data-step="2"] [data-col="users"] button'));
  assert.deepEqual(urlQuery().list, { step: 2, limit: 50, offset: 0 });
  await shot('funnel-exclusion');

  await page.goto(queryURL(q));
  await waitResult('funnel');
  await page.selectOption('[aria-label="Step order"]', 'strict');
  await runAndWait('funnel');
  const strict = { ...q, order: 'strict' };
  sameQuery(strict);
  const ws = await api(strict);
  assert.equal(ws.order, 'strict');
  assert.deepEqual(await stepUsers(), ws.steps.map((s) => [s.event, num(s.users)]));

  // Any order: steps are counted, and exclusions lose their step range
  // (unordered funnels take them over the whole funnel only).
  await page.selectOption('[aria-label="Step order"]', 'unordered');
  assert.equal(await page.locator('[aria-label="Exclusion 1 from step"]').count(), 0);
  await runAndWait('funnel');
  const unordered = { ...start, order: 'unordered', exclusions: [{ event: 'question' }] };
  sameQuery(unordered);
  const wu = await api(unordered);
  assert.deepEqual(await page.$$eval('table[data-kind="funnel"] tr[data-step]', (trs) => trs.map((tr) => tr.children[1].textContent)), ['1 step', '2 steps']);
  assert.deepEqual((await stepUsers()).map((r) => r[1]), wu.steps.map((s) => num(s.users)));
  await drillAndCount(page.locator('table[data-kind="funnel"] tr[data-step="1"] [data-col="dropped"] button'));
  await shot('funnel-unordered');
});

test('funnel views: conversion over time and time to convert equal the API; counts, points and bars drill down', async () => {
  const q0 = { kind: 'funnel', app: 'cardano', range: { from: '2021-05-03', to: '2021-06-14' }, tz: 'UTC', now: '2021-06-10T00:00:00Z',
    steps: [{ event: 'signup' }, { event: 'comment' }, { event: 'answer' }], window: '14d', breakdown: { property: 'up_votes', source: 'user', limit: 2 } };
  await page.goto(queryURL(q0));
  await waitResult('funnel');
  await page.click('[aria-label="Funnel view switch"] >> text=Conversion over time');
  await waitResult('funnel-trends');
  sameQuery({ ...q0, view: 'trends' }, 'the view switch runs the same funnel in the trends view');
  assert.equal(await page.inputValue('[aria-label="Funnel view"]'), 'trends', 'the builder shows the view');
  await page.selectOption('[aria-label="Interval"]', 'week');
  await page.selectOption('[aria-label="View to step"]', '2');
  await runAndWait('funnel-trends');
  const q = { ...q0, view: 'trends', interval: 'week', to_step: 2 };
  sameQuery(q);
  const want = await api(q);
  const groups = [want, ...want.breakdown];
  const rows = await page.$$eval('table[data-kind="funnel-trends"] tbody tr', (trs) => trs.map((tr) => ({
    incomplete: tr.classList.contains('incomplete'),
    cells: [...tr.querySelectorAll('td[data-group]')].map((td) => td.textContent.trim()),
  })));
  assert.equal(rows.length, want.buckets.length);
  rows.forEach((r, i) => {
    assert.equal(r.incomplete, want.buckets[i].incomplete, `bucket ${i} incomplete`);
    assert.deepEqual(r.cells, groups.flatMap((g) => [num(g.buckets[i].entered), num(g.buckets[i].converted),
      g.buckets[i].conversion === null ? '–' : pct(g.buckets[i].conversion)]), `bucket ${i}`);
  });
  assert.ok(want.buckets.some((b) => b.incomplete), 'buckets after now are incomplete');
  const chart = await chartData('Conversion over time');
  assert.deepEqual(chart.datasets.map((d) => d.data), groups.map((g) => g.buckets.map((b) => (b.conversion === null ? null : 100 * b.conversion))));
  await shot('funnel-trends');
  // A breakdown value's entered users, then a point's converted users.
  const b = want.breakdown[0].buckets.findIndex((x) => x.entered > 0);
  await drillAndCount(page.locator(`table[data-kind="funnel-trends"] tr[data-bucket="${b}"] td[data-group="1"][data-col="entered"] button`));
  assert.deepEqual(urlQuery().list, { bucket: want.buckets[b].start, status: 'entered', breakdown_value: want.breakdown[0].value, limit: 50, offset: 0 });
  const c = want.buckets.findIndex((x) => x.converted > 0);
  const n = await clickForList(() => clickChart('Conversion over time', 0, c));
  assert.equal(n, want.buckets[c].converted, 'a point opens the bucket\'s converted users');
  assert.deepEqual(urlQuery().list, { bucket: want.buckets[c].start, status: 'converted', limit: 50, offset: 0 });

  await page.goto(queryURL(q));
  await waitResult('funnel-trends');
  await page.click('[aria-label="Funnel view switch"] >> text=Time to convert');
  await waitResult('funnel-times');
  sameQuery({ ...q0, view: 'time_to_convert', to_step: 2 }, 'the trends view\'s interval is dropped, its steps kept');
  await page.fill('#bins', '5');
  await runAndWait('funnel-times');
  const tq = { ...q0, view: 'time_to_convert', to_step: 2, bins: 5 };
  sameQuery(tq);
  const tw = await api(tq);
  const tgroups = [tw, ...tw.breakdown];
  const cells = await page.$$eval('table[data-kind="funnel-times"] tr[data-bin]', (trs) => trs.map((tr) => [...tr.querySelectorAll('td[data-group]')].map((td) => td.textContent.trim())));
  assert.equal(cells.length, 5);
  cells.forEach((r, i) => assert.deepEqual(r, tgroups.map((g) => num(g.histogram[i].users)), `bin ${i}`));
  const tchart = await chartData('Time to convert');
  assert.deepEqual(tchart.datasets.map((d) => d.data), tw.breakdown.map((g) => g.histogram.map((x) => x.users)), 'a bar series per breakdown value');
  await shot('funnel-time-to-convert');
  const bin = tw.histogram.findIndex((x) => x.users > 0);
  await drillAndCount(page.locator(`table[data-kind="funnel-times"] tr[data-bin="${bin}"] td[data-group="0"] button`));
  assert.deepEqual(urlQuery().list, { bin, limit: 50, offset: 0 });
  const bb = tw.breakdown[1].histogram.findIndex((x) => x.users > 0);
  const m = await clickForList(() => clickChart('Time to convert', 1, bb));
  assert.equal(m, tw.breakdown[1].histogram[bb].users, 'a bar opens its users');
  assert.deepEqual(urlQuery().list, { bin: bb, breakdown_value: tw.breakdown[1].value, limit: 50, offset: 0 });
});

test('trend: a formula and the previous period through the controls; a previous point drills to as many users', async () => {
  const q0 = { kind: 'trend', app: 'cardano', range: { from: '2021-06-01', to: '2021-07-15' }, tz: 'UTC', interval: 'week',
    series: [{ event: 'answer', math: 'users' }, { event: 'question', math: 'users' }] };
  await page.goto(queryURL(q0));
  await waitResult('trend');
  await page.click('text=+ Formula');
  assert.equal(await page.inputValue('[aria-label="Formula 1"]'), 'A / B');
  await page.fill('[aria-label="Formula 1"]', 'A / B * 100');
  await page.selectOption('[aria-label="Compare with"]', 'previous');
  await runAndWait('trend');
  const q = { ...q0, formulas: ['A / B * 100'], compare: 'previous' };
  sameQuery(q);
  const want = await api(q);
  assert.equal(want.series.length, 4);
  assert.equal(want.formulas.length, 2);
  for (const [i, f] of want.formulas.entries()) {
    for (const [k, b] of f.buckets.entries()) assert.equal(await page.textContent(`span[data-formula="${i}"][data-bucket="${k}"]`), b.value === null ? '–' : num(b.value));
    assert.equal(await page.textContent(`span[data-formula="${i}"][data-bucket="total"]`), num(f.total));
  }
  const chart = await chartData('Result chart');
  assert.deepEqual(chart.datasets.map((d) => [d.borderDash, d.yAxisID]),
    [[null, 'y'], [null, 'y'], [[4, 3], 'y'], [[4, 3], 'y'], [null, 'y2'], [[4, 3], 'y2']], 'previous periods dashed, formulas on their own axis');
  assert.deepEqual(chart.datasets[2].data, want.series[2].buckets.map((b) => b.value));
  assert.deepEqual(chart.datasets[5].data, want.formulas[1].buckets.map((b) => b.value));
  await shot('trend-formula-compare');
  // A previous period's point: its users, asked over the compared range.
  const b = want.series[2].buckets.findIndex((x) => x.value > 0);
  const n = await drillAndCount(page.locator(`button[data-series="2"][data-bucket="${b}"][data-period="previous"]`));
  assert.equal(n, want.series[2].buckets[b].value);
  const dq = urlQuery();
  assert.deepEqual(dq, { ...q0, range: want.compare_range, list: { series: 0, bucket: want.series[2].buckets[b].start, limit: 50, offset: 0 } });
  // A current point keeps the comparison.
  await page.goto(queryURL(q));
  await waitResult('trend');
  const c = want.series[1].buckets.findIndex((x) => x.value > 0);
  assert.equal(await drillAndCount(page.locator(`button[data-series="1"][data-bucket="${c}"]:not([data-period])`)), want.series[1].buckets[c].value);
  assert.equal(urlQuery().compare, 'previous');
});

test('relative ranges: a preset, a custom length and "as of" the end of the data run as written', async () => {
  const q0 = { kind: 'trend', app: 'cardano', range: RANGE, tz: 'UTC', interval: 'week', series: [{ event: 'answer', math: 'count' }] };
  await page.goto(queryURL(q0));
  await waitResult('trend');
  await page.click('[aria-label="Date presets"] >> text=7d');
  await page.fill('#last-n', '8');
  await page.selectOption('[aria-label="Relative range unit"]', 'w');
  await page.click('#builder >> text=end of data');
  await runAndWait('trend');
  const schema = await apiGet('api/apps/cardano/schema');
  const end = new Date(Math.floor(schema.max_time / 1000)).toISOString().replace(/\.\d+Z$/, 'Z');
  const q = { ...q0, range: { last: '8w' }, now: end };
  sameQuery(q);
  assert.equal(await page.inputValue('#now'), end);
  const want = await api(q);
  assert.ok(want.series[0].total > 0, 'the last 8 weeks of the data have answers');
  const cells = await page.$$eval('table[data-kind="trend"] tr[data-bucket] td:nth-child(2)', (tds) => tds.map((td) => td.textContent.trim()));
  assert.deepEqual(cells, want.series[0].buckets.map((b) => num(b.value)));
  assert.ok(want.series[0].buckets.at(-1).incomplete, 'the week of "now" is incomplete');
  await shot('relative-range');
});

test('stickiness: series, interval, min events, cumulative and a breakdown equal the API; a cell drills to as many users', async () => {
  await page.goto(queryURL({ kind: 'trend', app: 'cardano', range: RANGE, tz: 'UTC', interval: 'week', series: [{ event: 'answer', math: 'count' }] }));
  await waitResult('trend');
  await page.click('.kinds button[data-kind="stickiness"]');
  await waitResult('stickiness');
  await setFixedRange({ from: '2021-05-03', to: '2021-06-28' });
  await page.selectOption('[aria-label="Series 1 event"]', 'answer');
  await page.click('text=+ Series');
  await page.selectOption('[aria-label="Series 2 event"]', 'comment');
  await page.selectOption('[aria-label="Interval"]', 'week');
  await page.fill('#min-events', '2');
  await page.check('#cumulative');
  await page.selectOption('[aria-label="Breakdown property"]', 'user:up_votes');
  await page.fill('#breakdown-limit', '2');
  await runAndWait('stickiness');
  const q = { kind: 'stickiness', app: 'cardano', range: { from: '2021-05-03', to: '2021-06-28' }, tz: 'UTC', interval: 'week',
    series: [{ event: 'answer' }, { event: 'comment' }], min_events: 2, cumulative: true, breakdown: { property: 'up_votes', source: 'user', limit: 2 } };
  sameQuery(q);
  const want = await api(q);
  const rows = await readTable('table[data-kind="stickiness"] tr[data-intervals]');
  assert.equal(rows.length, want.series[0].counts.length);
  rows.forEach((r, k) => assert.deepEqual(r.slice(1), want.series.map((s) => num(s.counts[k])), `${k + 1} weeks`));
  assert.match(rows[1][0], /≥ 2 weeks/);
  const chart = await chartData('Stickiness');
  assert.deepEqual(chart.datasets.map((d) => d.data), want.series.map((s) => s.counts));
  await shot('stickiness');
  // A cell of the second query series' first breakdown value.
  const i = want.series.findIndex((s) => s.event === 'comment');
  const k = want.series[i].counts.findIndex((x) => x > 0);
  await drillAndCount(page.locator(`button[data-series="${i}"][data-intervals="${k + 1}"]`));
  assert.deepEqual(urlQuery().list, { series: 1, intervals: k + 1, breakdown_value: want.series[i].breakdown_value, limit: 50, offset: 0 });
  // A bar of the first series.
  const n = await clickForList(() => clickChart('Stickiness', 0, 0));
  assert.equal(n, want.series[0].counts[0]);
});

test('lifecycle: dormant below zero, a user-property breakdown, and every status drills to as many users', async () => {
  await page.click('.kinds button[data-kind="lifecycle"]');
  await waitResult('lifecycle');
  const sources = await page.$$eval('[aria-label="Breakdown property"] option', (os) => os.map((o) => o.value).filter(Boolean));
  assert.ok(sources.length && sources.every((v) => v.startsWith('user:')), 'a lifecycle breaks down by user properties only');
  await page.selectOption('[aria-label="Activity event"]', 'answer');
  await page.selectOption('[aria-label="Interval"]', 'week');
  await page.selectOption('[aria-label="Breakdown property"]', 'user:up_votes');
  await page.fill('#breakdown-limit', '1');
  await runAndWait('lifecycle');
  const q = { kind: 'lifecycle', app: 'cardano', range: { from: '2021-05-03', to: '2021-06-28' }, tz: 'UTC', interval: 'week', event: 'answer',
    breakdown: { property: 'up_votes', source: 'user', limit: 1 } };
  sameQuery(q, 'the stickiness tab\'s range and breakdown carried over, its own fields not');
  const want = await api(q);
  const STATUS = ['new', 'returning', 'resurrecting', 'dormant'];
  const check = async (buckets) => {
    const rows = await readTable('table[data-kind="lifecycle"] tr[data-bucket]');
    assert.deepEqual(rows.map((r) => r.slice(1)), buckets.map((b) => STATUS.map((s) => num(b[s]))));
    const chart = await chartData('Lifecycle');
    assert.deepEqual(chart.datasets.map((d) => d.data), STATUS.map((s) => buckets.map((b) => b[s])));
    return chart;
  };
  const chart = await check(want.buckets);
  assert.ok(want.buckets.some((b) => b.dormant < 0) && chart.yMin < 0, 'dormant users are drawn below zero');
  await shot('lifecycle');
  // A breakdown value's table, and its dormant users.
  const g = want.breakdown[0];
  await page.click(`[aria-label="Lifecycle group"] >> text=up_votes = ${g.value}`);
  assert.equal(await page.textContent('table[data-kind="lifecycle"] caption'), `up_votes = ${g.value}`);
  await check(g.buckets);
  const i = g.buckets.findIndex((b) => b.dormant < 0);
  const cell = page.locator(`table[data-kind="lifecycle"] tr[data-bucket="${i}"] [data-col="dormant"] button`);
  const n = await clickForList(() => cell.click());
  assert.equal(n, -g.buckets[i].dormant, 'as many users as the dormant count says');
  assert.deepEqual(urlQuery().list, { bucket: g.buckets[i].start, status: 'dormant', breakdown_value: g.value, limit: 50, offset: 0 });
  // A bar of new users, for all users.
  await page.goto(queryURL(q));
  await waitResult('lifecycle');
  const j = want.buckets.findIndex((b) => b.new > 0);
  assert.equal(await clickForList(() => clickChart('Lifecycle', 0, j)), want.buckets[j].new);
  assert.deepEqual(urlQuery().list, { bucket: want.buckets[j].start, status: 'new', limit: 50, offset: 0 });
});

test('paths: a Sankey of the API\'s edges; a band and a user count drill to the edge\'s users', async () => {
  await page.click('.kinds button[data-kind="paths"]');
  await waitResult('paths');
  await setFixedRange(RANGE);
  await page.click('text=+ Start at');
  await page.selectOption('[aria-label="Path start event"]', 'signup');
  await page.fill('#path-steps', '4');
  await page.fill('#max-edges', '12');
  await runAndWait('paths');
  const q = { kind: 'paths', app: 'cardano', range: RANGE, tz: 'UTC', steps: 4, max_edges: 12, start: { event: 'signup' } };
  sameQuery(q, 'no breakdown carried into paths');
  const want = await api(q);
  assert.equal(want.edges.length, 12);
  const rows = await readTable('table[data-kind="paths"] tr[data-edge]');
  assert.deepEqual(rows.map((r) => r.slice(2, 4)), want.edges.map((e) => [num(e.sessions), num(e.users)]));
  const chart = await chartData('Paths flow');
  assert.equal(chart.type, 'sankey');
  assert.deepEqual(chart.datasets[0].data, want.edges.map((e) => ({ from: e.source, to: e.target, flow: e.sessions })));
  await shot('paths');
  const n = await clickForList(() => clickChart('Paths flow', 0, 0));
  assert.equal(n, want.edges[0].users);
  assert.deepEqual(urlQuery().list, { source: want.edges[0].source, target: want.edges[0].target, limit: 50, offset: 0 });
  await drillAndCount(page.locator('table[data-kind="paths"] tr[data-edge="4"] [data-col="users"] button'));
  assert.deepEqual(urlQuery().list, { source: want.edges[4].source, target: want.edges[4].target, limit: 50, offset: 0 });

  // Pages by URL on the generator's web events.
  const uq = { kind: 'paths', app: 'shop', range: SHOP, tz: 'UTC', events: ['page_view'], item_property: 'url', steps: 5, max_edges: 30 };
  await page.goto(queryURL(uq));
  await waitResult('paths');
  const uw = await api(uq);
  assert.ok(uw.edges.length > 10 && uw.edges.every((e) => /^\d+_\//.test(e.source)), 'nodes are URLs');
  assert.deepEqual((await chartData('Paths flow')).datasets[0].data.length, uw.edges.length);
  await shot('paths-url');
});

test('attribution: the table and charts per channel equal the API, the model is a control, a channel drills to its users', async () => {
  const q = { kind: 'attribution', app: 'shop', range: SHOP, tz: 'UTC', conversion: { event: 'install' },
    touchpoints: [{ event: 'ad_click', lookback: '7d' }, { event: 'ad_impression', lookback: '1d' }], channel: 'channel', model: 'last_touch',
    subsequent: { event: 'purchase', window: '30d', value: 'revenue' }, interval: 'week' };
  await page.goto(queryURL(q));
  await waitResult('attribution');
  for (const [sel, v] of [['Conversion event', 'install'], ['Touchpoint 1 event', 'ad_click'], ['Touchpoint 1 lookback length', '7'],
    ['Touchpoint 2 event', 'ad_impression'], ['Touchpoint 2 lookback length', '1'], ['Channel property', 'event:channel'],
    ['Attribution model', 'last_touch'], ['Subsequent event', 'purchase'], ['Subsequent window length', '30'], ['Subsequent value', 'event:revenue'], ['Interval', 'week']]) {
    assert.equal(await page.inputValue(`[aria-label="${sel}"]`), v, sel);
  }
  const check = async (want) => {
    const rows = await page.$$eval('table[data-kind="attribution"] tr[data-row]', (trs) => trs.map((tr) => ['conversions', 'users', 'subsequent_events', 'subsequent_value']
      .map((c) => tr.querySelector(`[data-col="${c}"]`).textContent.trim())));
    assert.deepEqual(rows, want.channels.map((c) => [num(c.conversions), num(c.users), num(c.subsequent.events), num(c.subsequent.value)]));
    const chart = await chartData('Conversions by channel');
    assert.deepEqual(chart.labels, want.channels.map((c) => c.channel));
    assert.deepEqual(chart.datasets[0].data, want.channels.map((c) => c.conversions));
  };
  const want = await api(q);
  await check(want);
  const byBucket = await chartData('Conversions by bucket and channel');
  assert.deepEqual(byBucket.datasets.map((d) => d.data), want.channels.map((c) => c.buckets.map((b) => b.conversions)));
  await shot('attribution');
  // The model as a control over the result: time decay re-runs.
  await page.click('[aria-label="Attribution model switch"] >> text=Time decay');
  await waitResult('attribution');
  await waitShown();
  sameQuery({ ...q, model: 'time_decay' });
  const decay = await api(urlQuery());
  await check(decay);
  assert.ok(decay.channels.some((c) => !Number.isInteger(c.conversions)), 'time decay splits conversions');
  await page.fill('[aria-label="Half-life length"]', '2');
  await runAndWait('attribution');
  sameQuery({ ...q, model: 'time_decay', half_life: '2d' });
  await shot('attribution-time-decay');
  // A channel's users: from the table, then from a bar.
  const social = decay.channels.findIndex((c) => c.channel === 'social');
  const n = await drillAndCount(page.locator(`table[data-kind="attribution"] tr[data-row="${social}"] [data-col="users"] button`));
  const hl = await api({ ...q, model: 'time_decay', half_life: '2d' });
  assert.equal(n, hl.channels[social].users);
  assert.deepEqual(urlQuery().list, { channel: 'social', limit: 50, offset: 0 });
  const m = await clickForList(() => clickChart('Conversions by channel', 0, 1));
  assert.equal(m, hl.channels[1].users);
  assert.deepEqual(urlQuery().list, { channel: hl.channels[1].channel, limit: 50, offset: 0 });
  // Priorities: the second touchpoint moves first.
  await page.click('[aria-label="Raise touchpoint 2"]');
  await page.click('[aria-label="Stop listing users"]');
  await runAndWait('attribution');
  assert.deepEqual(urlQuery().touchpoints, [q.touchpoints[1], q.touchpoints[0]]);
  // CSV of the result: the server's attribution columns.
  const [dl] = await Promise.all([page.waitForEvent('download'), page.click('#result .toolbar >> text=CSV')]);
  assert.equal(dl.suggestedFilename(), 'spur-attribution.csv');
  assert.equal(readFileSync(await dl.path(), 'utf8').split('\n')[0],
    'channel,breakdown_value,bucket,conversions,users,value,subsequent_events,subsequent_value,incomplete');
});

test('links round-trip: every new option shows in the builder and runs as given', async () => {
  const links = [
    [{ kind: 'funnel', app: 'cardano', range: RANGE, tz: 'UTC', steps: [{ event: 'answer' }, { event: 'badge' }, { event: 'comment' }], window: '7d', order: 'strict',
      exclusions: [{ event: 'question', where: [{ property: 'value', op: 'gte', value: 1 }], from_step: 1, to_step: 2 }],
      view: 'trends', interval: 'week', week_start: 'sunday', from_step: 1, to_step: 2, breakdown: { property: 'detail', limit: 3, attribution: { step: 2 } } },
    'funnel-trends', { 'Step order': 'strict', 'Exclusion 1 event': 'question', 'Exclusion 1 filter 1 operator': 'gte', 'Exclusion 1 from step': '1',
      'Exclusion 1 to step': '2', 'Funnel view': 'trends', Interval: 'week', 'Week start': 'sunday', 'View to step': '2', 'Breakdown attribution': 'step:2' }],
    [{ kind: 'funnel', app: 'cardano', range: RANGE, tz: 'UTC', steps: [{ event: 'question' }, { event: 'answer' }], window: '99y', order: 'unordered',
      view: 'time_to_convert', bins: 12, breakdown: { property: 'detail', limit: 2, attribution: 'last_touch' } },
    'funnel-times', { 'Step order': 'unordered', 'Funnel view': 'time_to_convert', '#bins': '12', 'Window unit': 'y', 'Breakdown attribution': 'last_touch' }],
    [{ kind: 'trend', app: 'cardano', range: { last: '3mo' }, now: '2021-07-20T12:00:00Z', tz: 'UTC', interval: 'month',
      series: [{ event: 'answer', math: 'users' }, { event: '$any', math: 'users' }], formulas: ['A / B * 100'], formula: 'B - A', compare: '-1y' },
    'trend', { 'Relative range length': '3', 'Relative range unit': 'mo', '#now': '2021-07-20T12:00:00Z', 'Formula 1': 'A / B * 100', Formula: 'B - A', 'Compare with': '-1y' }],
    [{ kind: 'stickiness', app: 'cardano', range: { from: '2021-05-01T12:00:00Z', to: '2021-05-08' }, tz: 'UTC', interval: 'day',
      series: [{ event: '$any', where: [{ property: 'value', op: 'is_set' }], label: 'valued' }], min_events: 2, cumulative: true,
      breakdown: { property: 'up_votes', source: 'user', limit: 2 }, list: { series: 0, intervals: 3, breakdown_value: '(other)', limit: 10 } },
    'stickiness', { 'Series 1 event': '$any', 'Series 1 filter 1 operator': 'is_set', '#min-events': '2', Interval: 'day' }],
    [{ kind: 'lifecycle', app: 'cardano', range: { from: '2021-10-01', to: '2021-12-06' }, tz: 'UTC', interval: 'month',
      event: { event: '$any', where: [{ property: 'value', op: 'is_not_set' }] }, breakdown: { property: 'up_votes', source: 'user', limit: 1 },
      list: { bucket: '2021-11-15', status: 'dormant', breakdown_value: '0', limit: 8 } },
    'lifecycle', { 'Activity event': '$any', 'Activity filter 1 operator': 'is_not_set', Interval: 'month', 'Breakdown property': 'user:up_votes' }],
    [{ kind: 'paths', app: 'cardano', range: RANGE, tz: 'UTC', events: ['signup', 'badge'], item_property: 'detail', exclude: ['Autobiographer'],
      session_gap: '1d', start: { event: 'signup' }, end: { event: 'badge', where: [{ property: 'detail', op: 'eq', value: 'Supporter' }] }, steps: 4, min_sessions: 2, max_edges: 10 },
    'paths', { 'Path events': 'some', 'Path event 1': 'signup', 'Path event 2': 'badge', 'Path items': 'detail', 'Excluded items': 'Autobiographer',
      'Session gap length': '1', 'Session gap unit': 'd', 'Path start event': 'signup', 'Path end event': 'badge', 'Path end filter 1 value': 'Supporter',
      '#path-steps': '4', '#min-sessions': '2', '#max-edges': '10' }],
    [{ kind: 'attribution', app: 'shop', range: SHOP, tz: 'UTC', conversion: { event: 'purchase' }, conversions: 'first', value: 'revenue',
      touchpoints: [{ event: 'ad_click', lookback: '30d' }, { event: 'ad_impression', where: [{ property: 'platform', op: 'eq', value: 'ios' }], lookback: '2w' }],
      channel: 'channel', model: 'time_decay', half_life: '36h', interval: 'week', week_start: 'sunday',
      breakdown: { property: 'platform', source: 'user', limit: 2 }, list: { channel: 'social', breakdown_value: 'ios', limit: 5 } },
    'attribution', { 'Conversions counted': 'first', 'Conversion value': 'event:revenue', 'Touchpoint 2 lookback unit': 'w', 'Touchpoint 2 filter 1 value': 'ios',
      'Attribution model': 'time_decay', 'Half-life length': '36', 'Half-life unit': 'h', 'Week start': 'sunday' }],
  ];
  for (const [q, kind, controls] of links) {
    await page.goto(queryURL(q));
    await waitResult(kind);
    await waitShown();
    sameQuery(q, `${q.kind}: the URL is not rewritten`);
    for (const [sel, v] of Object.entries(controls)) {
      assert.equal(await page.inputValue(sel.startsWith('#') ? sel : `[aria-label="${sel}"]`), v, `${q.kind}: ${sel}`);
    }
    const want = await api(q);
    if (q.list) {
      assert.equal(int(await page.textContent('[data-testid="list-count"]')), want.list.users, `${q.kind}: the list`);
      assert.ok(want.list.users > 0, `${q.kind}: the list has users`);
    }
    await page.click('text=Query JSON');
    assert.deepEqual(JSON.parse(await page.inputValue('[aria-label="Query JSON"]')), q, `${q.kind}: the JSON editor shows the query`);
    await page.click('#run');
    await waitShown();
    sameQuery(q, `${q.kind}: running the builder runs the same query`);
  }
});

test('dashboard tiles of the new analyses draw their charts', async () => {
  const post = async (path, body) => {
    const r = await fetchAPI(path, { method: 'POST', body: JSON.stringify(body) });
    assert.equal(r.status, 201, path);
    return r.json();
  };
  const ins = [];
  for (const [name, query] of [
    ['Signup paths', { kind: 'paths', range: RANGE, tz: 'UTC', start: { event: 'signup' }, steps: 4, max_edges: 12 }],
    ['Answerers lifecycle', { kind: 'lifecycle', range: { from: '2021-05-03', to: '2021-07-05' }, tz: 'UTC', interval: 'week', event: 'answer' }],
    ['Weekly stickiness', { kind: 'stickiness', range: { from: '2021-05-03', to: '2021-06-28' }, tz: 'UTC', interval: 'week', series: [{ event: 'answer' }] }],
    ['Signup to comment', { kind: 'funnel', range: RANGE, tz: 'UTC', steps: [{ event: 'signup' }, { event: 'comment' }], window: '14d', view: 'trends', interval: 'month' }],
  ]) ins.push(await post('api/apps/cardano/insights', { name, query }));
  const dash = await post('api/apps/cardano/dashboards', { name: 'New analyses', tiles: ins.map((i) => ({ insight: i.id })) });
  await page.goto(`${base}apps/cardano/dashboards/${dash.id}`);
  for (const i of ins) await page.waitForSelector(`.tile[data-insight="${i.id}"] [data-testid="tile-age"]`);
  const types = await page.$$eval('.tile canvas', (cs) => cs.map((c) => window.Chart.getChart(c).config.type));
  assert.deepEqual(types, ['sankey', 'bar', 'bar', 'line']);
  await shot('dashboard-new-analyses');
});

test('phone width (420 px): the new analyses fit', async () => {
  await page.setViewportSize({ width: 420, height: 900 });
  try {
    for (const [name, q, kind] of [
      ['funnel-trends', { kind: 'funnel', app: 'cardano', range: { from: '2021-05-03', to: '2021-06-14' }, tz: 'UTC', steps: [{ event: 'signup' }, { event: 'comment' }],
        window: '14d', view: 'trends', interval: 'week', breakdown: { property: 'up_votes', source: 'user', limit: 2 } }, 'funnel-trends'],
      ['funnel-times', { kind: 'funnel', app: 'cardano', range: RANGE, tz: 'UTC', steps: [{ event: 'question' }, { event: 'answer' }], window: '7d', view: 'time_to_convert' }, 'funnel-times'],
      ['trend-compare', { kind: 'trend', app: 'cardano', range: { from: '2021-06-01', to: '2021-07-15' }, tz: 'UTC', interval: 'week',
        series: [{ event: 'answer' }, { event: 'question' }], formula: 'A / B', compare: 'previous' }, 'trend'],
      ['stickiness', { kind: 'stickiness', app: 'cardano', range: { from: '2021-05-03', to: '2021-06-28' }, tz: 'UTC', interval: 'week', series: [{ event: 'answer' }, { event: 'comment' }] }, 'stickiness'],
      ['lifecycle', { kind: 'lifecycle', app: 'cardano', range: { from: '2021-05-03', to: '2021-07-05' }, tz: 'UTC', interval: 'week', event: 'answer' }, 'lifecycle'],
      ['paths', { kind: 'paths', app: 'shop', range: SHOP, tz: 'UTC', events: ['page_view'], item_property: 'url', steps: 5, max_edges: 30 }, 'paths'],
      ['attribution', { kind: 'attribution', app: 'shop', range: SHOP, tz: 'UTC', conversion: { event: 'install' }, touchpoints: [{ event: 'ad_click', lookback: '7d' }],
        channel: 'channel', interval: 'week', breakdown: { property: 'platform', source: 'user', limit: 2 } }, 'attribution'],
    ]) {
      await page.goto(queryURL(q));
      await waitResult(kind);
      const width = await page.evaluate(() => document.documentElement.scrollWidth);
      assert.ok(width <= 420, `${name}: page is ${width} px wide`);
      const box = await page.locator('#result canvas').first().boundingBox();
      assert.ok(box.x >= 0 && box.x + box.width <= 420 && box.height > 150, `${name}: chart at ${box.x}+${box.width}, ${box.height} high`);
      await shot(`phone-${name}`);
    }
  } finally {
    await page.setViewportSize({ width: 1400, height: 1000 });
  }
});
