// The `web` build in a real headless Chromium (Debian's `chromium`, driven by playwright-core):
// a page served from 127.0.0.1 runs a rate-limited workload against an in-page fake fetch
// (test-browser/workload.js) and the example page (examples/browser/) sends its burst.
// Only counts and outcomes are asserted, never timings.
import test from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const repo = fileURLToPath(new URL('../../', import.meta.url));

// The only folders the server hands out (URL prefix = folder under the repository).
const SERVED = ['bindings-wasm/pkg/', 'bindings-wasm/test-browser/', 'examples/browser/'];
const TYPES = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json',
  '.wasm': 'application/wasm',
};

/** A static file server on 127.0.0.1 and a free port. */
async function startServer() {
  const server = http.createServer((req, res) => {
    const url = new URL(req.url, 'http://127.0.0.1');
    let rel = decodeURIComponent(url.pathname).replace(/^\/+/, '');
    if (rel.endsWith('/')) rel += 'index.html';
    const file = path.join(repo, rel);
    const allowed = SERVED.some((prefix) => rel.startsWith(prefix)) && !rel.split('/').includes('..');
    if (req.method !== 'GET' || !allowed || !fs.existsSync(file) || !fs.statSync(file).isFile()) {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found');
      return;
    }
    res.writeHead(200, {
      'content-type': TYPES[path.extname(file)] || 'application/octet-stream',
      'cache-control': 'no-store',
    });
    fs.createReadStream(file).pipe(res);
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, origin: `http://127.0.0.1:${server.address().port}` };
}

function chromiumPath() {
  if (process.env.CHROMIUM) return process.env.CHROMIUM;
  try {
    return execFileSync('sh', ['-c', 'command -v chromium'], { encoding: 'utf8' }).trim();
  } catch (_) {
    throw new Error('chromium not found: apt-get install -y chromium (scripts/tests.d/30-wasm.sh does this)');
  }
}

const FLAGS = [
  '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync',
];

let web;
let context;
let profile;

test.before(async () => {
  web = await startServer();
  profile = fs.mkdtempSync(path.join(os.tmpdir(), 'ratelane-chromium-'));
  context = await chromium.launchPersistentContext(profile, {
    executablePath: chromiumPath(),
    headless: true,
    args: FLAGS,
  });
});

test.after(async () => {
  if (context) await context.close();
  if (web) await new Promise((resolve) => web.server.close(resolve));
  if (profile) fs.rmSync(profile, { recursive: true, force: true });
});

/** Opens `url`, collecting page errors and console errors. */
async function open(url) {
  const page = await context.newPage();
  const problems = [];
  page.on('pageerror', (error) => problems.push(`pageerror: ${error.message}`));
  page.on('response', (response) => {
    if (response.status() >= 400) problems.push(`HTTP ${response.status()} ${response.url()}`);
  });
  page.on('console', (message) => {
    if (message.type() === 'error') problems.push(`console: ${message.text()}`);
  });
  await page.goto(web.origin + url);
  return { page, problems };
}

test('the web build runs a rate-limited workload in Chromium', async (t) => {
  const { page, problems } = await open('/bindings-wasm/test-browser/page.html');
  await page.waitForFunction(() => window.result !== undefined, null, { timeout: 60_000 });
  const result = await page.evaluate(() => window.result);
  await page.close();
  t.diagnostic(`page result: ${JSON.stringify(result)}`);
  assert.equal(result.error, undefined, result.error);
  assert.deepEqual(problems, []);

  assert.equal(result.beforeInit, 'ratelane-wasm: call init() or initSync() before using the package');
  assert.equal(result.nodeGlobals, 'undefined,undefined,undefined');

  // A burst of 12 into a bucket of 4: all answered, each sent once, no 429.
  assert.deepEqual(result.burst.outcomes, Array(12).fill(200));
  assert.equal(result.burst.fetches, 12);
  assert.equal(result.burst.count429, 0);
  assert.deepEqual(result.burst.learned, ['msgs']);

  // A hidden sub-limit: its 429s are retried, every request ends with 200.
  assert.deepEqual(result.subLimit.outcomes, Array(4).fill(200));
  assert.ok(result.subLimit.count429 >= 1, 'the sub-limit was hit');
  assert.equal(result.subLimit.scopes.length, result.subLimit.count429);
  assert.ok(result.subLimit.scopes.every((s) => s === 'sub_limit'), result.subLimit.scopes.join());

  // maxWait, AbortSignal and close() end requests with the right errors, unsent.
  const f = result.failures;
  assert.equal(f.first, 200);
  assert.deepEqual(f.maxWait, { isClass: true, code: 'max_wait_exceeded', over: true });
  assert.equal(f.pioneer, 200);
  assert.equal(f.queuedBefore, 2);
  assert.equal(f.aborted, 'AbortError:20'); // DOMException's own legacy code for AbortError
  assert.deepEqual(f.closed, { isClass: true, code: 'closed' });
  assert.equal(f.fetches, 2, 'only the two first messages were sent');
});

test('the example page sends its burst: some at once, some delayed, the rest fail by maxWait', async (t) => {
  // 12 messages into a bucket of 4 per 2 s with maxWait 3 s: two windows' worth are sent
  // (at ~0 s and ~2 s); the four that could only go at ~4 s fail with max_wait_exceeded (at
  // once, as soon as the first answer tells the limiter the window).
  const query = 'auto&messages=12&limit=4&window=2000&maxWait=3000&latency=20';
  const { page, problems } = await open(`/examples/browser/index.html?${query}`);
  await page.waitForFunction(() => window.demoResult !== undefined, null, { timeout: 60_000 });
  const result = await page.evaluate(() => window.demoResult);
  const rows = await page.locator('#rows tr').count();
  const shown = await page.locator('#failed').textContent();
  await page.close();
  t.diagnostic(`example result: ${JSON.stringify(result)}`);
  assert.deepEqual(problems, []);
  assert.deepEqual(result.outcomes, [...Array(8).fill('ok'), ...Array(4).fill('max_wait_exceeded')]);
  assert.equal(result.sent, 8);
  assert.equal(result.ok, 8);
  assert.equal(result.failed, 4);
  assert.equal(result.waiting, 0);
  assert.ok(result.delayed >= 4, 'the second window was held until the reset');
  assert.equal(result.serverCount429, 0);
  assert.equal(rows, 12);
  assert.equal(shown, '4');
});
