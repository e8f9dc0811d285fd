// The package as a user installs it: every entry point (require and import of the node build,
// the web build, the bundler build) exports the names of the napi package but the simulator's
// and the stores', plus init/initSync; `ratelane-wasm/sim` and `ratelane-wasm/server` export
// those from their own modules; and the shared Promise driver works over the wasm core.
import test from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const require = createRequire(import.meta.url);
const here = fileURLToPath(new URL('.', import.meta.url));
const pkgDir = fileURLToPath(new URL('../pkg/', import.meta.url));

const cjs = require('ratelane-wasm');
const esm = await import('ratelane-wasm');
const web = await import('ratelane-wasm/web');
const sim = require('ratelane-wasm/sim');
const server = require('ratelane-wasm/server');

// What the napi package `ratelane` exports (createRatelane's result plus createRatelane).
const DRIVER_NAMES = [
  'RateLimiter', 'RatelaneError', 'UsageError', 'UnknownRequestError', 'InvalidStateError',
  'InvalidConfigError', 'InvalidRequestError', 'LimiterClosedError', 'LimiterBusyError', 'SnapshotError',
  'SnapshotForeignError', 'SnapshotVersionError', 'SnapshotMalformedError', 'InvalidArgumentError',
  'SimulationContractError', 'InsufficientCapacityError', 'RateLimitError', 'DeadlineExceededError', 'MaxWaitExceededError', 'DeferredError',
  'RetriesExhaustedError', 'MaybeSentError', 'NetworkError', 'UnauthorizedError', 'ClosedError',
  'FAIL_CLASSES', 'USAGE_CLASSES', 'fromCoreError', 'toCoreConfig', 'classifyFailure',
  'headerPairs', 'outputObject', 'Metrics', 'instrument', 'Limiter', 'SimServer', 'Simulation', 'GcraStore', 'LeakyBucketStore',
  'FixedWindowStore', 'FAIL_CODES', 'ERROR_CODES', 'createRatelane', 'readLlmRequest', 'ratelaneFetch',
];
// Each in one entry only: the simulator's module and the server-side limiters' module.
const SIM_NAMES = ['SimServer', 'Simulation'];
const SERVER_NAMES = ['GcraStore', 'LeakyBucketStore', 'FixedWindowStore'];
const INIT = ['init', 'initSync', 'default'];
const MAIN_NAMES = DRIVER_NAMES.filter((name) => !SIM_NAMES.includes(name) && !SERVER_NAMES.includes(name));
const EXPECTED = [...MAIN_NAMES, ...INIT].sort();

const nsNow = () => Math.round(performance.now() * 1e6);

test('every entry point exports the same names', async () => {
  assert.deepEqual(Object.keys(cjs).sort(), EXPECTED);
  assert.deepEqual(Object.keys(esm).sort(), EXPECTED);
  assert.deepEqual(Object.keys(web).sort(), EXPECTED);
  // import and require of the node build hand out the same objects.
  for (const name of MAIN_NAMES) assert.equal(esm[name], cjs[name], name);
  assert.equal(esm.default, cjs.init);
  assert.equal(web.default, web.init);
  // The simulator and the stores: one entry each, with its own init, in every build.
  for (const [entry, names] of [['sim', SIM_NAMES], ['server', SERVER_NAMES]]) {
    const required = require(`ratelane-wasm/${entry}`);
    const imported = await import(`ratelane-wasm/${entry}`);
    const webEntry = await import(`../pkg/web/${entry}.js`);
    for (const loaded of [required, imported, webEntry]) assert.deepEqual(Object.keys(loaded).sort(), [...names, ...INIT].sort(), entry);
    for (const name of names) assert.equal(imported[name], required[name], name);
  }
});

test('the driver and the server answers are the shared js/ files, not copies of them', () => {
  for (const [shared, built] of [['driver', 'driver'], ['server_objects', 'server_objects']]) {
    const source = fs.readFileSync(new URL(`../../js/${shared}.js`, import.meta.url), 'utf8');
    for (const file of [`node/${built}.cjs`, `web/${built}.mjs`, `bundler/${built}.mjs`]) {
      assert.ok(fs.readFileSync(pkgDir + file, 'utf8').startsWith(source), `${file} is js/${shared}.js plus an export line`);
    }
  }
});

/** A fake `send` answering from the core's Discord simulator, on the driver's clock. */
function simulatedSend(ratelane, server, request, counts) {
  return () => {
    counts.sent += 1;
    const answer = server.handle(nsNow(), request);
    return { status: answer.status, headers: answer.headers, body: answer.bodyText };
  };
}

test('RateLimiter sends a burst through the wasm core without a 429', async () => {
  const { RateLimiter } = cjs;
  const { SimServer } = sim;
  // 4 per 150 ms on this route; 10 messages: three windows.
  const server = new SimServer(JSON.stringify({
    buckets: { m: { limit: 4, window_ns: 150e6 } },
    routes: { 'POST /channels/:id/messages': { bucket: 'm' } },
  }));
  const limiter = new RateLimiter();
  const learned = [];
  limiter.on('bucketLearned', (e) => learned.push(e.bucket));
  const request = { method: 'POST', path: '/channels/100000000000000001/messages' };
  const counts = { sent: 0 };
  const results = await Promise.all(Array.from({ length: 10 }, () =>
    limiter.run(request.method, request.path, simulatedSend(cjs, server, request, counts))));
  assert.deepEqual(results.map((r) => r.status), Array(10).fill(200));
  assert.equal(counts.sent, 10, 'nothing sent twice');
  assert.equal(server.count429(), 0);
  assert.deepEqual(learned, ['m']);
  await limiter.close();
});

test('RateLimiter: typed errors, AbortSignal, close', async () => {
  const { SimServer } = sim;
  const { RateLimiter, ClosedError, MaxWaitExceededError, DeferredError, InvalidConfigError, RateLimitError } = cjs;
  assert.throws(() => new RateLimiter({ globlLimit: 1 }), (e) => e instanceof InvalidConfigError && e.code === 'invalid_config');
  const server = new SimServer(JSON.stringify({
    buckets: { m: { limit: 1, window_ns: 60e9 } },
    routes: { 'POST /channels/:id/messages': { bucket: 'm' } },
  }));
  const limiter = new RateLimiter({ maxWait: 30_000 });
  const request = { method: 'POST', path: '/channels/100000000000000001/messages' };
  const counts = { sent: 0 };
  const send = simulatedSend(cjs, server, request, counts);
  const other = { method: 'POST', path: '/channels/100000000000000002/messages' };
  const sendOther = simulatedSend(cjs, server, other, counts);
  assert.equal((await limiter.run(request.method, request.path, send)).status, 200);
  // The window of 60 s is known now: a request that would wait longer than maxWait fails at once.
  await assert.rejects(limiter.run(request.method, request.path, send), (e) =>
    e instanceof MaxWaitExceededError && e instanceof RateLimitError && e.code === 'max_wait_exceeded' && e.predictedWait > 30_000);
  // With deferAfter it is handed back instead, with when to run it again on both clocks.
  await assert.rejects(limiter.run(request.method, request.path, send, { deferAfter: 10_000 }), (e) =>
    e instanceof DeferredError && e instanceof RateLimitError && e.code === 'deferred' &&
    e.retryAfter > 30_000 && e.retryAfter <= 60_000 && Math.abs(e.retryAtMs - Date.now() - e.retryAfter) < 1_000 &&
    e.retryAtDate.getTime() === e.retryAtMs && Math.abs(e.retryAt - performance.now() - e.retryAfter) < 1_000);
  const patient = new RateLimiter();
  assert.equal((await patient.run(other.method, other.path, sendOther)).status, 200);
  const controller = new AbortController();
  const aborted = patient.run(other.method, other.path, sendOther, { signal: controller.signal });
  const queued = patient.run(other.method, other.path, sendOther);
  assert.equal(patient.queued, 2);
  controller.abort(new Error('user gave up'));
  await assert.rejects(aborted, /user gave up/);
  assert.equal(patient.queued, 1);
  const closing = patient.close();
  await assert.rejects(queued, (e) => e instanceof ClosedError && e.code === 'closed');
  await closing;
  assert.equal(counts.sent, 2);
  assert.equal(server.count429(), 0);
  await limiter.close();
});

test('web build under Node: an error before init, then initSync with the bytes', async () => {
  const { Limiter, RateLimiter, initSync } = web;
  const webServer = await import('../pkg/web/server.js');
  const webSim = await import('../pkg/web/sim.js');
  const { GcraStore, LeakyBucketStore } = webServer;
  assert.throws(() => new Limiter(), /^Error: ratelane-wasm: call init\(\) or initSync\(\)/);
  assert.throws(() => new RateLimiter(), /call init\(\) or initSync\(\)/);
  assert.throws(() => GcraStore.perWindow(1, 1e9), /ratelane-wasm\/server: call init\(\) or initSync\(\)/);
  assert.throws(() => new webSim.SimServer(), /ratelane-wasm\/sim: call init\(\) or initSync\(\)/);
  initSync(fs.readFileSync(pkgDir + 'web/ratelane_wasm_bg.wasm'));
  initSync(fs.readFileSync(pkgDir + 'web/ratelane_wasm_bg.wasm')); // harmless again
  // Each module is instantiated by its own entry's init: the client's leaves the others alone.
  assert.throws(() => GcraStore.perWindow(1, 1e9), /ratelane-wasm\/server: call init\(\) or initSync\(\)/);
  webServer.initSync(fs.readFileSync(pkgDir + 'web/ratelane_wasm_server_bg.wasm'));
  await webSim.init(fs.readFileSync(pkgDir + 'web/ratelane_wasm_sim_bg.wasm'));
  assert.equal(new webSim.SimServer().count429(), 0);
  const limiter = new Limiter();
  assert.equal(limiter.enqueue(0, { method: 'GET', path: '/users/@me' }), 1);
  assert.deepEqual(limiter.drain(), [{ type: 'send', id: 1 }, { type: 'idle' }]);
  const driver = new RateLimiter();
  const response = await driver.run('GET', '/users/@me', () => ({ status: 204, headers: [] }));
  assert.equal(response.status, 204);
  await driver.close();
  // Static factories hand out instances of the exported classes; their answers are shaped.
  const store = GcraStore.perWindow(1, 1e9);
  assert.ok(store instanceof GcraStore);
  assert.ok(LeakyBucketStore.fromLegacy({ minIntervalNs: 1e9 }) instanceof LeakyBucketStore);
  store.check('k', 0);
  assert.deepEqual(store.check('k', 0).ietfHeaders('p'), [
    ['RateLimit-Policy', '"p";q=1;w=1'], ['RateLimit', '"p";r=0;t=1'], ['Retry-After', '1'],
  ]);
});

test('bundler build: imported with Node\'s wasm ES module integration', () => {
  const script = `
    import { Limiter, RateLimiter, FAIL_CODES, init } from 'ratelane-wasm/bundler';
    import { FixedWindowStore } from 'ratelane-wasm/server';
    await init();
    const l = new Limiter();
    l.enqueue(0, { method: 'GET', path: '/users/@me' });
    const r = await new RateLimiter().run('GET', '/x', () => ({ status: 200, headers: [] }));
    const jobs = new FixedWindowStore(1, 1e9);
    jobs.schedule('g', 0);
    const scheduled = jobs.schedule('g', 0);
    console.log(JSON.stringify({ outputs: l.drain(), codes: FAIL_CODES.length, status: r.status, scheduled }));
  `;
  const out = execFileSync(process.execPath, ['--experimental-wasm-modules', '--no-warnings', '--input-type=module', '-e', script], {
    cwd: here, encoding: 'utf8',
  });
  assert.deepEqual(JSON.parse(out), {
    outputs: [{ type: 'send', id: 1 }, { type: 'idle' }], codes: 9, status: 200,
    scheduled: { runNow: false, releaseAtNs: 1e9, waiting: 1 },
  });
});

test('npm pack, installed into another project: require, import and the web build work', () => {
  const os = require('node:os');
  const path = require('node:path');
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ratelane-wasm-pack-'));
  try {
    const root = fileURLToPath(new URL('..', import.meta.url));
    const npm = (args, cwd) => execFileSync('npm', [...args, '--no-audit', '--no-fund', '--loglevel=error'], { cwd, encoding: 'utf8' });
    const tarball = npm(['pack', '--pack-destination', tmp], root).trim().split('\n').pop();
    const app = path.join(tmp, 'app');
    fs.mkdirSync(app);
    fs.writeFileSync(path.join(app, 'package.json'), '{ "name": "app", "private": true }');
    npm(['install', '--offline', path.join(tmp, tarball)], app);
    const script = `
      const cjs = require('ratelane-wasm');
      const l = new cjs.Limiter();
      l.enqueue(0, { method: 'GET', path: '/users/@me' });
      import('ratelane-wasm').then(async (esm) => {
        const web = await import('ratelane-wasm/web');
const sim = require('ratelane-wasm/sim');
const server = require('ratelane-wasm/server');
        const fs = require('node:fs');
        web.initSync(fs.readFileSync(require.resolve('ratelane-wasm/ratelane_wasm_bg.wasm')));
        const status = (await new web.RateLimiter().run('GET', '/x', () => ({ status: 204, headers: [] }))).status;
        const allowed = require('ratelane-wasm/server').GcraStore.perWindow(1, 1e9).check('k', 0).allowed;
        const count429 = new (require('ratelane-wasm/sim').SimServer)().count429();
        console.log(JSON.stringify({ out: l.drain().length, same: esm.RateLimiter === cjs.RateLimiter, status, allowed, count429 }));
      });
    `;
    const out = execFileSync(process.execPath, ['-e', script], { cwd: app, encoding: 'utf8' });
    assert.deepEqual(JSON.parse(out), { out: 2, same: true, status: 204, allowed: true, count429: 0 });
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
});
