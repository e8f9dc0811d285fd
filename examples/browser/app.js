// The example page's script: a burst through ratelane-wasm's RateLimiter to a fake server.
//
// The limiter decides when each request may go; `send` is called at that moment and does the
// HTTP request (here a fake `fetch`). Requests it can never send in time reject at once with
// MaxWaitExceededError. Open index.html through a local web server (see README.md).
import init, { RateLimiter, RateLimitError } from 'ratelane-wasm';
// The simulator is a module of its own, which a real page, whose server is Discord, never loads.
import initSim, { SimServer } from 'ratelane-wasm/sim';

await init(); // fetches and instantiates ratelane_wasm_bg.wasm
await initSim(); // and the simulator's, ratelane_wasm_sim_bg.wasm

const $ = (id) => document.getElementById(id);
const API = 'https://discord.invalid/api/v10';
/** A request held longer than this counts as delayed by the limiter. */
const DELAYED_MS = 250;

/**
 * A fake `fetch` for one burst: the core's simulator of Discord's rate limits answers each
 * request after a random network delay, as a real `Response`.
 */
function fakeDiscord({ limit, windowMs, latencyMs }) {
  const server = new SimServer(JSON.stringify({
    buckets: { messages: { limit, window_ns: Math.round(windowMs * 1e6) } },
    routes: { 'POST /channels/:id/messages': { bucket: 'messages' } },
  }));
  const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
  async function fetch(url, { method = 'GET', signal } = {}) {
    await sleep(latencyMs * (0.5 + Math.random()));  // uplink
    signal?.throwIfAborted();
    const path = new URL(url).pathname.replace(/^\/api\/v10/, '');
    const answer = server.handle(Math.round(performance.now() * 1e6), { method, path });
    await sleep(latencyMs * (0.5 + Math.random()));  // downlink
    return new Response(answer.bodyText, { status: answer.status, headers: answer.headers });
  }
  return { fetch, server };
}

const counters = { waiting: 0, delayed: 0, sent: 0, ok: 0, failed: 0, count429: 0 };
function show() {
  for (const [name, value] of Object.entries(counters)) $(name).textContent = value;
}

function log(text) {
  const item = document.createElement('li');
  item.textContent = `${(performance.now() / 1000).toFixed(3)} s  ${text}`;
  $('log').append(item);
  item.scrollIntoView({ block: 'nearest' });
}

function row(n) {
  const tr = document.createElement('tr');
  tr.innerHTML = `<td>${n}</td><td class="state"></td><td class="waited"></td><td class="answer"></td>`;
  $('rows').append(tr);
  const set = (state, text, answer) => {
    tr.className = state;
    tr.querySelector('.state').textContent = text;
    if (answer !== undefined) tr.querySelector('.answer').textContent = answer;
  };
  return { set, waited: (ms) => { tr.querySelector('.waited').textContent = ms.toFixed(0); } };
}

/** Sends `messages` requests at once and shows each one's fate; resolves with the totals. */
async function burst(settings) {
  Object.keys(counters).forEach((k) => { counters[k] = 0; });
  $('rows').replaceChildren();
  $('log').replaceChildren();
  show();

  const { fetch, server } = fakeDiscord(settings);
  const limiter = new RateLimiter({ maxWait: settings.maxWait });
  limiter.on('bucketLearned', (e) => log(`learned: ${e.route} is bucket "${e.bucket}"`));
  limiter.on('rateLimited', (e) => log(`429 (${e.scope}): holding for ${e.retryAfter.toFixed(0)} ms`));
  log(`burst of ${settings.messages} messages; bucket ${settings.limit} per ${settings.windowMs} ms; maxWait ${settings.maxWait} ms`);

  const path = '/channels/100000000000000001/messages';
  const requests = Array.from({ length: settings.messages }, (_, i) => {
    const r = row(i + 1);
    const queuedAt = performance.now();
    let held = false;
    let waiting = true;
    r.set('waiting', 'waiting');
    counters.waiting += 1;
    // Mark as delayed once it has been held for a while (the limiter is waiting for a reset).
    const delayTimer = setTimeout(() => {
      held = true;
      counters.delayed += 1;
      r.set('waiting', 'delayed');
      show();
    }, DELAYED_MS);
    const stopWaiting = () => {
      if (!waiting) return;
      waiting = false;
      counters.waiting -= 1;
      clearTimeout(delayTimer);
    };
    const send = async ({ signal }) => {
      if (waiting) {
        stopWaiting();
        r.waited(performance.now() - queuedAt);
      }
      counters.sent += 1;
      r.set('sent', held ? 'sent (after a delay)' : 'sent');
      show();
      const response = await fetch(API + path, { method: 'POST', signal });
      if (response.status === 429) counters.count429 += 1;
      return response;
    };
    return limiter.run('POST', path, send).then(
      (response) => {
        counters.ok += response.status === 200 ? 1 : 0;
        r.set('done', 'answered', response.status);
        show();
        return 'ok';
      },
      (error) => {
        stopWaiting();
        counters.failed += 1;
        const why = error instanceof RateLimitError ? error.code : error.message;
        const wait = error.predictedWait != null ? ` (predicted wait ${error.predictedWait.toFixed(0)} ms)` : '';
        r.set('failed', 'failed', `${why}${wait}`);
        show();
        return error.code || 'error';
      },
    );
  });
  const outcomes = await Promise.all(requests);
  await limiter.close();
  log(`done: ${counters.ok} answered, ${counters.failed} failed, ${server.count429()} answered 429 by the server`);
  return { outcomes, ...counters, rows: $('rows').children.length, serverCount429: server.count429() };
}

function readSettings() {
  const form = new FormData($('settings'));
  const params = new URLSearchParams(location.search);
  const value = (name) => Number(params.get(name) ?? form.get(name));
  return {
    messages: value('messages'),
    limit: value('limit'),
    windowMs: value('window'),
    maxWait: value('maxWait'),
    latencyMs: value('latency'),
  };
}

$('settings').addEventListener('submit', async (event) => {
  event.preventDefault();
  $('send').disabled = true;
  try {
    await burst(readSettings());
  } finally {
    $('send').disabled = false;
  }
});
$('send').disabled = false;

// ?auto runs one burst on load (settings may come from the query string too); the repository's
// browser test uses it and reads window.demoResult.
if (new URLSearchParams(location.search).has('auto')) {
  window.demoResult = await burst(readSettings());
}
