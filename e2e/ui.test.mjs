// Browser test of Spur's web UI: a real headless Chromium (Debian's
// package, driven by playwright-core) loads the UI of a `spur serve` over
// the bundled data, builds a trend, a funnel and a retention query through
// the pickers, and checks that every number on screen equals the API's
// answer to the same query written independently here.
//
// Environment: SPUR_BIN (the spur binary), SPUR_DATA (a store holding the
// demo apps: `spur demo --keep DIR`), optional CHROMIUM (default
// /usr/bin/chromium) and SPUR_SCREENSHOTS (a directory for a PNG of each
// view). Run through e2e/run.sh.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { chromium } from 'playwright-core';

const SPUR = process.env.SPUR_BIN;
const DATA = process.env.SPUR_DATA;
const SHOTS = process.env.SPUR_SCREENSHOTS || '';
assert.ok(SPUR && DATA, 'set SPUR_BIN and SPUR_DATA (see e2e/run.sh)');

let server, serverExit, base, context, page, profileDir;
const pageErrors = [];

before(async () => {
  server = spawn(SPUR, ['serve', '--data', DATA, '--listen', '127.0.0.1:0', '--debug-listen', ''],
    { stdio: ['ignore', 'pipe', 'inherit'] });
  serverExit = new Promise((resolve) => server.on('exit', (code, signal) => resolve({ code, signal })));
  base = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('spur serve did not print its address within 20 s')), 20_000);
    server.on('exit', (code) => reject(new Error(`spur serve exited early with ${code}`)));
    createInterface({ input: server.stdout }).on('line', (line) => {
      const m = line.match(/UI and API on (http:\/\/\S+\/)/);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    });
  });
  profileDir = mkdtempSync(join(tmpdir(), 'spur-e2e-chromium-'));
  context = await chromium.launchPersistentContext(profileDir, {
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    viewport: { width: 1400, height: 1000 },
  });
  page = context.pages()[0] || (await context.newPage());
  page.setDefaultTimeout(15_000);
  page.on('pageerror', (e) => pageErrors.push(`page error: ${e.message}`));
  // A 4xx answer is an expected error state (the API's error is shown);
  // Chromium logs it as a failed resource load.
  page.on('console', (m) => {
    if (m.type() === 'error' && !/Failed to load resource: .* status of 4\d\d/.test(m.text())) pageErrors.push(`console error: ${m.text()}`);
  });
  if (SHOTS) mkdirSync(SHOTS, { recursive: true });
});

after(async () => {
  await context?.close();
  if (server && server.exitCode === null) server.kill('SIGTERM');
  const exit = await serverExit;
  if (profileDir) rmSync(profileDir, { recursive: true, force: true });
  // SIGTERM must shut the server down gracefully: exit status 0.
  assert.deepEqual(exit, { code: 0, signal: null }, 'spur serve did not exit cleanly on SIGTERM');
  assert.deepEqual(pageErrors, [], 'the page logged errors');
});

async function api(q) {
  const resp = await fetch(`${base}api/apps/${q.app}/query`, { method: 'POST', body: JSON.stringify(q) });
  const body = await resp.json();
  assert.equal(resp.status, 200, JSON.stringify(body));
  return body;
}

const nf = new Intl.NumberFormat('en-US');
const pct = (f) => (100 * f).toFixed(1) + '%';
const int = (s) => Number(s.replaceAll(',', ''));

// runAndWait clicks Run and waits for the result table of kind.
async function runAndWait(kind) {
  await page.click('#run');
  await page.waitForSelector(`#result:not([aria-busy]) table[data-kind="${kind}"]`);
  await page.waitForFunction(() => !document.querySelector('#run').disabled);
}

async function hashQuery() {
  const hash = await page.evaluate(() => location.hash);
  assert.match(hash, /^#q=/);
  return JSON.parse(decodeURIComponent(hash.slice(3)));
}

async function shot(name) {
  if (SHOTS) await page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true });
}

const RANGE = { from: '2021-04-26', to: '2021-12-06' };

async function setRange(r) {
  await page.fill('#from', r.from);
  await page.fill('#to', r.to);
  await page.fill('#tz', 'UTC');
}

test('trend built with the pickers shows the API numbers', async () => {
  await page.goto(base);
  await page.waitForSelector('#result:not([aria-busy]) table[data-kind="trend"]');
  assert.equal(await page.inputValue('#app'), 'cardano', 'the first app is selected');
  await setRange(RANGE);
  await page.selectOption('[aria-label="Interval"]', 'week');
  await page.selectOption('[aria-label="Series 1 event"]', 'signup');
  await page.selectOption('[aria-label="Series 1 math"]', 'count');
  await page.click('text=+ Series');
  await page.selectOption('[aria-label="Series 2 event"]', '$any');
  await page.selectOption('[aria-label="Series 2 math"]', 'users');
  await runAndWait('trend');

  const want = await api({ kind: 'trend', app: 'cardano', range: RANGE, tz: 'UTC', interval: 'week',
    series: [{ event: 'signup', math: 'count' }, { event: '$any', math: 'users' }] });
  assert.equal(want.series.length, 2);
  const rows = await page.$$eval('table[data-kind="trend"] tbody tr[data-bucket]',
    (trs) => trs.map((tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent)));
  assert.equal(rows.length, want.series[0].buckets.length);
  rows.forEach((cells, b) => {
    const bk = want.series[0].buckets[b];
    assert.equal(cells[0], bk.start.slice(0, 10) + (bk.incomplete ? '*' : ''), `bucket ${b} label`);
    want.series.forEach((s, i) => assert.equal(int(cells[i + 1]), s.buckets[b].value, `bucket ${b} series ${i}`));
  });
  const totals = await page.$$eval('table[data-kind="trend"] td[data-col="total"]', (tds) => tds.map((td) => td.textContent));
  assert.deepEqual(totals.map(int), want.series.map((s) => s.total));
  await shot('trend');
});

test('funnel built with the pickers shows the API numbers, and its URL reproduces it', async () => {
  await page.click('#kinds button[data-kind="funnel"]');
  await setRange(RANGE);
  await page.selectOption('[aria-label="Step 1 event"]', 'signup');
  await page.selectOption('[aria-label="Step 2 event"]', 'question');
  await page.click('text=+ Step');
  await page.selectOption('[aria-label="Step 3 event"]', 'answer');
  await page.fill('#window-n', '30');
  await page.selectOption('[aria-label="Window unit"]', 'd');
  await runAndWait('funnel');

  const q = { kind: 'funnel', app: 'cardano', range: RANGE, tz: 'UTC',
    steps: [{ event: 'signup' }, { event: 'question' }, { event: 'answer' }], window: '30d' };
  const want = await api(q);
  const readSteps = () => page.$$eval('table[data-kind="funnel"] tr[data-step]', (trs) => trs.map((tr) => ({
    step: Number(tr.dataset.step),
    event: tr.children[1].textContent,
    users: tr.querySelector('[data-col="users"]').textContent,
    conversion: tr.querySelector('[data-col="conversion"]').textContent,
    fromPrev: tr.querySelector('[data-col="conversion_from_previous"]').textContent,
  })));
  const check = (got) => {
    assert.equal(got.length, 3);
    want.steps.forEach((s, i) => {
      assert.equal(got[i].step, s.step);
      assert.equal(got[i].event, s.event);
      assert.equal(int(got[i].users), s.users, `step ${s.step} users`);
      assert.equal(got[i].conversion, pct(s.conversion), `step ${s.step} conversion`);
      assert.equal(got[i].fromPrev, pct(s.conversion_from_previous), `step ${s.step} from previous`);
    });
  };
  check(await readSteps());
  assert.ok(want.steps[0].users > want.steps[1].users && want.steps[1].users > want.steps[2].users && want.steps[2].users > 0);

  // The URL holds the query: loading it in a fresh page shows the same funnel.
  const inURL = await hashQuery();
  for (const k of ['kind', 'app', 'range', 'tz', 'steps', 'window']) assert.deepEqual(inURL[k], q[k], `URL query field ${k}`);
  const url = page.url();
  const other = await context.newPage();
  try {
    await other.goto(url);
    await other.waitForSelector('#result:not([aria-busy]) table[data-kind="funnel"]');
    const p = page;
    page = other;
    try { check(await readSteps()); } finally { page = p; }
  } finally {
    await other.close();
  }
  await shot('funnel');
});

test('retention built with the pickers shows the API numbers', async () => {
  await page.click('#kinds button[data-kind="retention"]');
  // Cohorts up to the end of the data (2021-12-04), so later periods are
  // incomplete and flagged.
  const range = { from: '2021-10-04', to: '2021-12-06' };
  await setRange(range);
  await page.selectOption('[aria-label="Start event"]', 'signup');
  await page.selectOption('[aria-label="Return event"]', '$any');
  await page.selectOption('[aria-label="Period"]', 'week');
  await page.fill('#periods', '8');
  await runAndWait('retention');

  const want = await api({ kind: 'retention', app: 'cardano', range, tz: 'UTC', start: { event: 'signup' },
    return: { event: '$any' }, period: 'week', periods: 8, type: 'first_time', windows: 'calendar', criterion: 'on' });
  assert.ok(want.cohorts.length >= 8);
  assert.ok(want.cohorts.some((c) => c.incomplete.includes(true)), 'some cells are incomplete');
  const got = await page.$$eval('table[data-kind="retention"] tr[data-cohort]', (trs) => trs.map((tr) => ({
    start: tr.querySelector('[data-col="start"]').textContent,
    size: tr.querySelector('[data-col="size"]').textContent,
    cells: [...tr.querySelectorAll('td[data-period]')].map((td) => ({
      rate: td.querySelector('.rate').textContent,
      count: td.querySelector('.count').textContent,
      incomplete: td.classList.contains('incomplete'),
    })),
  })));
  assert.equal(got.length, want.cohorts.length);
  want.cohorts.forEach((c, i) => {
    assert.equal(got[i].start, c.start.slice(0, 10), `cohort ${i} start`);
    assert.equal(int(got[i].size), c.size, `cohort ${i} size`);
    assert.equal(got[i].cells.length, c.retained.length);
    c.retained.forEach((n, k) => {
      assert.equal(int(got[i].cells[k].count), n, `cohort ${i} period ${k} count`);
      assert.equal(got[i].cells[k].rate, pct(c.rates[k]), `cohort ${i} period ${k} rate`);
      assert.equal(got[i].cells[k].incomplete, c.incomplete[k], `cohort ${i} period ${k} incomplete`);
    });
  });
  const mean = await page.$$eval('table[data-kind="retention"] tr.total td[data-period]', (tds) => tds.map((td) => td.textContent));
  assert.deepEqual(mean, want.mean.map((m) => (m === null ? '–' : pct(m))));
  await shot('retention');
});

test('a bad query shows the API error', async () => {
  await page.click('#kinds button[data-kind="funnel"]');
  await page.fill('#from', '2021-06-01');
  await page.fill('#to', '2021-05-01');
  await page.click('#run');
  const alert = await page.waitForSelector('#status [role="alert"]');
  const text = await alert.textContent();
  assert.match(text, /invalid_query/);
  assert.match(text, /range/);
  await shot('error');
});
