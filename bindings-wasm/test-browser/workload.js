// Runs in headless Chromium (test-browser/browser.test.mjs): the `web` build of the package
// with the shared driver, against an in-page fake `fetch` answered by the core's Discord
// simulator (`ratelane-wasm/sim`, a module of its own). Publishes the outcomes (counts and error classes, no timings) as window.result.
import init, * as ratelane from '/bindings-wasm/pkg/web/index.js';
import initSim, { SimServer } from '/bindings-wasm/pkg/web/sim.js';

const { RateLimiter, MaxWaitExceededError, ClosedError, RateLimitError } = ratelane;

/** A fake fetch: a SimServer answers on the driver's clock (performance.now, in ns). */
function fakeFetch(serverConfig) {
  const server = new SimServer(JSON.stringify(serverConfig));
  const counts = { fetches: 0 };
  async function fetch(url, options = {}) {
    if (options.signal && options.signal.aborted) throw options.signal.reason;
    counts.fetches += 1;
    const path = new URL(url).pathname.replace(/^\/api\/v10/, '');
    const answer = server.handle(Math.round(performance.now() * 1e6), { method: options.method || 'GET', path });
    return new Response(answer.bodyText, { status: answer.status, headers: answer.headers });
  }
  return { fetch, server, counts };
}

const API = 'https://discord.invalid/api/v10';

/** `limiter.run` through the fake fetch; settles to a status or an error's class name and code. */
function call(limiter, fetch, method, path, options) {
  return limiter.run(method, path, ({ signal }) => fetch(API + path, { method, signal }), options)
    .then((response) => response.status, (error) => `${error.name}:${error.code ?? ''}`);
}

async function burst() {
  // Messages to one channel: 4 per 150 ms. Twelve of them: three windows, never a 429.
  const { fetch, server, counts } = fakeFetch({
    buckets: { msgs: { limit: 4, window_ns: 150e6 } },
    routes: { 'POST /channels/:id/messages': { bucket: 'msgs' } },
  });
  const limiter = new RateLimiter();
  const learned = [];
  limiter.on('bucketLearned', (e) => learned.push(e.bucket));
  const path = '/channels/100000000000000001/messages';
  const outcomes = await Promise.all(Array.from({ length: 12 }, () => call(limiter, fetch, 'POST', path)));
  await limiter.close();
  return { outcomes, fetches: counts.fetches, count429: server.count429(), learned };
}

async function hiddenSubLimit() {
  // A channel rename: the bucket allows 10, a hidden sub-limit only 2 per 800 ms. The 429s it
  // causes are retried after their retry_after; every rename ends with 200.
  const { fetch, server } = fakeFetch({
    buckets: { chan: { limit: 10, window_ns: 10e9 } },
    routes: { 'PATCH /channels/:id': { bucket: 'chan', sub_limit: { limit: 2, window_ns: 800e6 } } },
  });
  const limiter = new RateLimiter();
  const scopes = [];
  limiter.on('rateLimited', (e) => scopes.push(e.scope));
  const path = '/channels/100000000000000002';
  const outcomes = await Promise.all(Array.from({ length: 4 }, () => call(limiter, fetch, 'PATCH', path)));
  await limiter.close();
  return { outcomes, count429: server.count429(), scopes };
}

async function failures() {
  // One message per 60 s: after the first, the limiter knows the next waits a minute.
  const { fetch, counts } = fakeFetch({
    buckets: { slow: { limit: 1, window_ns: 60e9 } },
    routes: { 'POST /channels/:id/messages': { bucket: 'slow' } },
  });
  const path = '/channels/100000000000000003/messages';
  const impatient = new RateLimiter({ maxWait: 5_000 });
  const first = await call(impatient, fetch, 'POST', path);
  let maxWait = null;
  try {
    await impatient.run('POST', path, ({ signal }) => fetch(API + path, { method: 'POST', signal }));
  } catch (error) {
    maxWait = {
      isClass: error instanceof MaxWaitExceededError && error instanceof RateLimitError,
      code: error.code,
      over: error.predictedWait > 5_000,
    };
  }
  await impatient.close();

  const patient = new RateLimiter();
  const other = '/channels/100000000000000004/messages';
  const pioneer = await call(patient, fetch, 'POST', other);
  const controller = new AbortController();
  const aborted = call(patient, fetch, 'POST', other, { signal: controller.signal });
  const queued = patient.run('POST', other, ({ signal }) => fetch(API + other, { method: 'POST', signal }));
  const queuedBefore = patient.queued;
  controller.abort(new DOMException('the user left', 'AbortError'));
  const abortedOutcome = await aborted;
  const closing = patient.close();
  let closed = null;
  try {
    await queued;
  } catch (error) {
    closed = { isClass: error instanceof ClosedError, code: error.code };
  }
  await closing;
  return { first, maxWait, pioneer, queuedBefore, aborted: abortedOutcome, closed, fetches: counts.fetches };
}

const out = document.getElementById('out');
try {
  let beforeInit = null;
  try {
    new RateLimiter();
  } catch (error) {
    beforeInit = error.message;
  }
  await init();
  await initSim(); // the simulator's own module (ratelane_wasm_sim_bg.wasm)
  const result = {
    beforeInit,
    nodeGlobals: [typeof process, typeof Buffer, typeof require].join(','),
    burst: await burst(),
    subLimit: await hiddenSubLimit(),
    failures: await failures(),
  };
  out.textContent = JSON.stringify(result, null, 2);
  window.result = result;
} catch (error) {
  out.textContent = `failed: ${error && error.stack}`;
  window.result = { error: String(error && error.stack) };
}
