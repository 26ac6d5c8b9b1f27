// The browser tests' harness (ui.test.mjs, analyses.test.mjs): a `spur
// serve` over SPUR_DATA on a free port and a headless Chromium page,
// started before a file's tests and stopped after them (the page must
// log no error), and helpers that drive the UI and ask the API the same
// questions. page and base are live bindings: restartServer() changes
// base.
//
// The server requires API keys. At a store's first start `spur serve`
// prints a login URL carrying the first admin key: the harness keeps it
// (loginURL, adminKey; ui.test.mjs signs in through it) and writes the key
// to SPUR_DATA/e2e-admin-key, which later files and restarts read. API
// calls here carry the admin key (fetchAPI); on a store that had its key
// before, the page is signed in before the tests.
//
// Environment: SPUR_BIN (the spur binary), SPUR_DATA (a store holding the
// demo apps, `spur demo --keep DIR`, and the generator's app "shop"),
// optional CHROMIUM (default /usr/bin/chromium) and SPUR_SCREENSHOTS (a
// directory for a PNG of each view). Run through e2e/run.sh.

import { before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, mkdirSync, readFileSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { chromium } from 'playwright-core';

const SPUR = process.env.SPUR_BIN;
const DATA = process.env.SPUR_DATA;
const SHOTS = process.env.SPUR_SCREENSHOTS || '';
assert.ok(SPUR && DATA, 'set SPUR_BIN and SPUR_DATA (see e2e/run.sh)');

let server, context, profileDir;
export let base, page;
export let loginURL, adminKey; // the first start's login URL, and the admin key
const pageErrors = [];
let corsExpected = false; // a test provokes the browser's CORS refusals
const keyFile = join(DATA, 'e2e-admin-key');

// expectCORSErrors tells the harness that the browser's CORS refusals
// logged meanwhile are expected (on), or no longer (off).
export function expectCORSErrors(on) {
  corsExpected = on;
}

// startServer runs `spur serve` on listen (default a free port) and waits
// for its address and, at the store's first start, its login URL.
async function startServer(listen = '127.0.0.1:0') {
  const proc = spawn(SPUR, ['serve', '--data', DATA, '--listen', listen, '--debug-listen', ''],
    { stdio: ['ignore', 'pipe', 'inherit'] });
  const exit = new Promise((resolve) => proc.on('exit', (code, signal) => resolve({ code, signal })));
  const url = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('spur serve did not print its address and keys within 20 s')), 20_000);
    proc.on('exit', (code) => reject(new Error(`spur serve exited early with ${code}`)));
    let addr;
    createInterface({ input: proc.stdout }).on('line', (line) => {
      const m = line.match(/UI and API on (http:\/\/\S+\/)/);
      if (m) addr = m[1];
      const k = line.match(/^ {4}(http:\/\/\S+\/#key=(spur_[a-z2-7]{32}))$/);
      if (k) {
        [, loginURL, adminKey] = k;
        writeFileSync(keyFile, adminKey);
      }
      if (/create more keys|needs a key/.test(line)) {
        clearTimeout(timer);
        resolve(addr);
      }
    });
  });
  if (!adminKey) {
    assert.ok(existsSync(keyFile), `no login URL (the store has an admin key) and no ${keyFile}: run the tests on a new store (e2e/run.sh)`);
    adminKey = readFileSync(keyFile, 'utf8').trim();
  }
  return { proc, exit, url };
}

// signIn signs the page in with the admin key (the login URL's way).
async function signIn() {
  await page.goto(`${base}#key=${adminKey}`);
  await page.waitForFunction(() => localStorage.getItem('spur.key'));
}

// stopServer stops it with SIGTERM, which must shut it down cleanly.
async function stopServer(s) {
  if (s.proc.exitCode === null) s.proc.kill('SIGTERM');
  assert.deepEqual(await s.exit, { code: 0, signal: null }, 'spur serve did not exit cleanly on SIGTERM');
}

before(async () => {
  server = await startServer();
  base = server.url;
  profileDir = mkdtempSync(join(tmpdir(), 'spur-e2e-chromium-'));
  context = await chromium.launchPersistentContext(profileDir, {
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    headless: true,
    acceptDownloads: true,
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
    if (m.type() !== 'error' || /Failed to load resource: .* status of 4\d\d/.test(m.text())) return;
    if (corsExpected && /CORS policy|Failed to load resource: net::ERR_FAILED/.test(m.text())) return;
    pageErrors.push(`console error: ${m.text()}`);
  });
  if (SHOTS) mkdirSync(SHOTS, { recursive: true });
  // A store that had its admin key before: sign in now (at the first start
  // the file's first test signs in through the login URL).
  if (!loginURL) await signIn();
});

after(async () => {
  await context?.close();
  if (server) await stopServer(server);
  if (profileDir) rmSync(profileDir, { recursive: true, force: true });
  assert.deepEqual(pageErrors, [], 'the page logged errors');
});

// fetchAPI is fetch of a path of the server with the admin key.
export const fetchAPI = (path, opts = {}) => fetch(base + path, { ...opts, headers: { Authorization: `Bearer ${adminKey}`, ...opts.headers } });

export async function api(q) {
  const resp = await fetchAPI(`api/apps/${q.app}/query`, { method: 'POST', body: JSON.stringify(q) });
  const body = await resp.json();
  assert.equal(resp.status, 200, JSON.stringify(body));
  return body;
}

export async function apiGet(path) {
  const resp = await fetchAPI(path);
  assert.equal(resp.status, 200, path);
  return resp.json();
}

export const nf = new Intl.NumberFormat('en-US');
export const pct = (f) => (100 * f).toFixed(1) + '%';
export const int = (s) => Number(s.replaceAll(',', ''));
export const num = (v) => (Number.isInteger(v) ? nf.format(v) : nf.format(Math.round(v * 100) / 100));

export const RANGE = { from: '2021-04-26', to: '2021-12-06' };

export function queryURL(q) {
  return `${base}apps/${q.app}/query?q=${encodeURIComponent(JSON.stringify(q))}`;
}

// waitResult waits for the result of kind to be shown, not running.
export async function waitResult(kind) {
  const sel = kind === 'cohort' ? '[data-testid="cohort-size"]' : `[data-kind="${kind}"]`;
  await page.waitForSelector(`#result:not([aria-busy]) ${sel}`);
  await page.waitForSelector('#run');
}

export async function runAndWait(kind) {
  await page.click('#run');
  await waitResult(kind);
}

// urlQuery is the query in the page's URL (?q=).
export function urlQuery() {
  return JSON.parse(new URL(page.url()).searchParams.get('q'));
}

export async function shot(name) {
  if (SHOTS) await page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true });
}

export async function setFixedRange(r) {
  await page.fill('#from', r.from);
  await page.fill('#to', r.to);
  await page.selectOption('#tz', 'UTC');
}

// restartServer stops the server (which must exit cleanly) and starts
// another on the same store and address: the same origin, so the browser
// keeps its key.
export async function restartServer() {
  await stopServer(server);
  server = await startServer(new URL(base).host);
  assert.equal(server.url, base);
}

// drillAndCount opens the users of a clickable number and returns the list's
// count, after checking that the number clicked says the same.
export async function drillAndCount(locator) {
  const shown = int((await locator.textContent()).trim());
  const listed = await clickForList(() => locator.click());
  assert.equal(listed, shown, 'the users listed are as many as the number clicked');
  return listed;
}

// waitShown waits until the result shown is the answer to the URL's query
// (not a previous one).
export async function waitShown() {
  await page.waitForFunction(() => {
    const r = document.querySelector('#result');
    return r && !r.hasAttribute('aria-busy') && r.dataset.shown === new URL(location.href).searchParams.get('q');
  });
}

// clickForList runs click (which opens a user list) and returns the
// count of the list shown for the new URL.
export async function clickForList(click) {
  const url = page.url();
  await click();
  await page.waitForFunction((u) => location.href !== u, url);
  await waitShown();
  await page.waitForSelector('#result .userlist');
  return int(await page.textContent('[data-testid="list-count"]'));
}


// clickChart clicks element index of dataset d in the chart whose canvas
// has aria-label label (a bar in the middle of its height, a point, a
// Sankey band at its center).
export async function clickChart(label, d, index) {
  const at = await page.locator(`canvas[aria-label="${label}"]`).evaluate((cv, [ds, i]) => {
    cv.scrollIntoView({ block: 'center' });
    const el = window.Chart.getChart(cv).getDatasetMeta(ds).data[i];
    const p = 'base' in el && el.base !== undefined
      ? (el.horizontal ? { x: (el.x + el.base) / 2, y: el.y } : { x: el.x, y: (el.y + el.base) / 2 })
      : el.getCenterPoint ? el.getCenterPoint() : { x: el.x, y: el.y };
    const r = cv.getBoundingClientRect();
    return { x: r.left + p.x, y: r.top + p.y };
  }, [d, index]);
  await page.mouse.click(at.x, at.y);
}

// chartData is the chart's config data ({labels, datasets}) as plain
// values, of the canvas with aria-label label.
export function chartData(label) {
  return page.locator(`canvas[aria-label="${label}"]`).evaluate((cv) => {
    const c = window.Chart.getChart(cv);
    return { type: c.config.type, labels: c.data.labels, datasets: c.data.datasets.map((d) => ({ label: d.label, data: d.data, borderDash: d.borderDash ?? null, yAxisID: d.yAxisID ?? null })),
      yMin: c.scales.y?.min ?? null };
  });
}
