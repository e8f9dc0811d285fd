'use strict';
// The core surface of js/CONTRACT.md as the `nodejs` build exposes it, beyond what the vectors
// replay: argument checking, error objects, the simulator.
const test = require('node:test');
const assert = require('node:assert/strict');
const wasm = require('ratelane-wasm');
const raw = require('../pkg/node/ratelane_wasm.js');

const { Limiter, FAIL_CODES, ERROR_CODES } = wasm;
// The simulator's own module (`ratelane-wasm/sim`).
const { SimServer, Simulation } = require('ratelane-wasm/sim');
const MSG = { method: 'POST', path: '/channels/100000000000000001/messages' };
const MS = 1e6;
const S = 1e9;

/** Asserts that `fn` throws an Error whose code is `code` (and message matches `message`). */
function throwsCode(fn, code, message) {
  assert.throws(fn, (e) => {
    assert.ok(e instanceof Error, `not an Error: ${e}`);
    assert.equal(e.code, code, `${e.message}`);
    if (message) assert.match(e.message, message);
    return true;
  });
}

test('code lists come from the core', () => {
  assert.deepEqual(FAIL_CODES, raw.failCodes());
  assert.deepEqual(ERROR_CODES, raw.errorCodes());
  assert.deepEqual(FAIL_CODES, [
    'deadline_exceeded', 'max_wait_exceeded', 'deferred', 'retries_exhausted', 'maybe_sent',
    'network_error', 'unauthorized', 'closed', 'insufficient_capacity',
  ]);
  assert.deepEqual(ERROR_CODES, [
    'unknown_request', 'invalid_state', 'invalid_config', 'invalid_request', 'limiter_closed',
    'limiter_busy', 'snapshot_foreign', 'snapshot_version', 'snapshot_malformed',
  ]);
  assert.ok(Object.isFrozen(FAIL_CODES) && Object.isFrozen(ERROR_CODES));
});

test('settings are JSON text; omitted means every default', () => {
  const defaults = new Limiter().configJson();
  assert.equal(new Limiter(undefined).configJson(), defaults);
  assert.equal(new Limiter(null).configJson(), defaults);
  assert.equal(new Limiter('{}').configJson(), defaults);
  assert.equal(JSON.parse(defaults).global_limit, 50);
  assert.equal(JSON.parse(new Limiter('{"profile":"github"}').configJson()).global_limit, 0);
  throwsCode(() => new Limiter('{"globl_limit": 1}'), 'invalid_config', /^invalid configuration: unknown key "globl_limit"/);
  throwsCode(() => new Limiter('{'), 'invalid_config', /^invalid configuration: /);
  throwsCode(() => new Limiter({ global_limit: 1 }), 'invalid_argument', /JSON text/);
  throwsCode(() => new SimServer('{"error_rate": 2}'), 'invalid_config', /error_rate/);
  throwsCode(() => new Simulation('{}', '{}', '{"latency": 3}'), 'invalid_config', /latency/);
});

test('times are JS numbers: checked, fractional part dropped', () => {
  const limiter = new Limiter();
  for (const bad of [-1, NaN, Infinity, Number.MAX_SAFE_INTEGER + 2]) {
    throwsCode(() => limiter.handleTimeout(bad), 'invalid_argument', /nowNs must be a finite number/);
  }
  for (const bad of [1n, '5', undefined, null, {}]) {
    throwsCode(() => limiter.enqueue(bad, MSG), 'invalid_argument', /nowNs must be a number/);
  }
  limiter.handleTimeout(Number.MAX_SAFE_INTEGER - 1000.5);
  // predict() never goes before the limiter's own now, so it shows the truncated value.
  assert.equal(limiter.predict(0, MSG), Number.MAX_SAFE_INTEGER - 1001);
  const other = new Limiter();
  other.handleTimeout(5.9);
  assert.equal(other.predict(0, MSG), 5);
  throwsCode(() => other.enqueue(0, { ...MSG, deadlineNs: -5 }), 'invalid_argument', /deadlineNs/);
  throwsCode(() => other.enqueue(0, { ...MSG, priority: 1.5 }), 'invalid_argument', /^request\.priority must be an integer/);
  throwsCode(() => other.enqueue(0, { ...MSG, priority: 2 ** 31 }), 'invalid_argument');
  throwsCode(() => other.cancel(0, -1), 'invalid_argument', /id must be/);
});

test('requests and responses are plain objects', () => {
  const limiter = new Limiter();
  throwsCode(() => limiter.enqueue(0, null), 'invalid_argument', /request must be an object, got null/);
  throwsCode(() => limiter.enqueue(0, 'GET /'), 'invalid_argument', /request must be an object/);
  throwsCode(() => limiter.enqueue(0, { path: '/x' }), 'invalid_argument', /method/);
  throwsCode(() => limiter.enqueue(0, { method: '', path: '/x' }), 'invalid_request', /^invalid request: /);
  // Keys the contract does not name are ignored, as JS options objects go.
  const id = limiter.enqueue(0, { ...MSG, signal: null, extra: 1, identity: 'bot' });
  assert.equal(id, 1);
  assert.deepEqual(limiter.drain(), [{ type: 'send', id: 1 }, { type: 'idle' }]);
  throwsCode(() => limiter.handleResponse(1, id, { status: 200 }), 'invalid_argument', /headers/);
  throwsCode(() => limiter.handleResponse(1, id, { status: 200, headers: [['a', 1]] }), 'invalid_argument');
  for (const status of [99, 1000, 70000, 200.5, -1, '200']) {
    throwsCode(() => limiter.handleResponse(1, id, { status, headers: [] }), 'invalid_argument', /status|response/);
  }
  throwsCode(() => limiter.handleFailure(1, id, 'lost'), 'invalid_argument', /not_sent/);
  assert.equal(limiter.inFlight, 1, 'a rejected argument changes nothing');
  const headers = [
    ['X-RateLimit-Limit', '1'], ['X-RateLimit-Remaining', '0'],
    ['X-RateLimit-Reset-After', '2.5'], ['X-RateLimit-Bucket', 'b1'],
  ];
  assert.equal(limiter.handleResponse(10 * MS, id, { status: 200, headers, body: null, wallClockMs: null }), 'complete');
  assert.deepEqual(limiter.drain(), [
    { type: 'bucket_learned', route: 'POST /channels/:id/messages', bucket: 'b1' },
    { type: 'idle' },
  ]);
});

test('misuse throws the core error with its code and message', () => {
  const limiter = new Limiter();
  throwsCode(() => limiter.cancel(0, 42), 'unknown_request', /^unknown request id 42$/);
  const a = limiter.enqueue(0, MSG);
  const b = limiter.enqueue(0, MSG);
  limiter.drain();
  throwsCode(() => limiter.handleResponse(1, b, { status: 200, headers: [] }), 'invalid_state', /^request 2 is not/);
  // The pioneer never reached the server: it backs off, and the next request goes.
  assert.equal(limiter.handleFailure(1, a, 'not_sent'), 'retry');
  assert.deepEqual(limiter.drain(), [{ type: 'send', id: b }, { type: 'idle' }]);
  limiter.close(2);
  assert.equal(limiter.isClosed, true);
  const [fail, end] = limiter.drain();
  assert.deepEqual(fail, {
    type: 'fail', id: a, code: 'closed', message: 'the limiter was closed before the request was sent',
  });
  assert.deepEqual(end, { type: 'idle' });
  assert.equal(limiter.inFlight, 1, 'requests in flight still take their responses');
  throwsCode(() => limiter.enqueue(3, MSG), 'limiter_closed');
});

test('fail outputs carry their prediction or attempt count', () => {
  const limiter = new Limiter('{"max_wait_ns": 1000000000}');
  const first = limiter.enqueue(0, MSG);
  limiter.drain();
  const headers = [
    ['X-RateLimit-Limit', '1'], ['X-RateLimit-Remaining', '0'],
    ['X-RateLimit-Reset-After', '10'], ['X-RateLimit-Bucket', 'b'],
  ];
  limiter.handleResponse(1 * MS, first, { status: 200, headers });
  limiter.drain();
  const late = limiter.enqueue(2 * MS, MSG);
  const [fail, end] = limiter.drain();
  assert.equal(fail.type, 'fail');
  assert.equal(fail.id, late);
  assert.equal(fail.code, 'max_wait_exceeded');
  assert.equal(typeof fail.predictedWaitNs, 'number');
  assert.ok(fail.predictedWaitNs > 9 * S);
  assert.ok(!('attempts' in fail) && !('predictedSendAtNs' in fail));
  assert.match(end.type, /^(idle|wait_until)$/);
  const deadline = limiter.enqueue(3 * MS, { ...MSG, deadlineNs: 4 * MS });
  const [dfail] = limiter.drain();
  assert.equal(dfail.id, deadline);
  assert.equal(dfail.code, 'deadline_exceeded');
  assert.equal(typeof dfail.predictedSendAtNs, 'number');
});

test('request costs and response usage: read apart from the serde fields, checked, in key order', () => {
  const chat = { method: 'POST', path: '/v1/chat/completions' };
  const limiter = new Limiter('{"profile": "openai", "global_limit": 0}');
  for (const [costs, message] of [
    ['tokens', /^request\.costs must be an object .*got a string$/],
    [[1], /^request\.costs must be an object .*got an array$/],
    [() => 1, /^request\.costs must be an object .*got a function$/],
    [{ tokens: -1 }, /^request\.costs\.tokens must be a whole number/],
    [{ tokens: 0.5 }, /^request\.costs\.tokens must be a whole number/],
    [{ tokens: 2 ** 53 }, /^request\.costs\.tokens must be a whole number/],
    [{ tokens: '5' }, /^request\.costs\.tokens must be a whole number >= 0 .*got a string$/],
    [{ tokens: 5n }, /^request\.costs\.tokens must be a whole number >= 0 .*got a bigint$/],
  ]) {
    throwsCode(() => limiter.enqueue(0, { ...chat, costs }), 'invalid_argument', message);
  }
  throwsCode(() => limiter.enqueue(0, { ...chat, costs: { requests: 1 } }), 'invalid_request', /requests/);
  throwsCode(() => limiter.enqueue(0, { ...chat, costs: { tokens: 1, Points: 2 } }), 'invalid_request', /Points/);
  const id = limiter.enqueue(0, { ...chat, costs: { tokens: 900, points: null, other: undefined } });
  assert.deepEqual(limiter.drain(), [{ type: 'send', id }, { type: 'idle' }]);
  const headers = [
    ['x-ratelimit-limit-tokens', '1000'], ['x-ratelimit-remaining-tokens', '900'], ['x-ratelimit-reset-tokens', '60s'],
  ];
  throwsCode(() => limiter.handleResponse(1, id, { status: 200, headers, body: { usage: 'x' } }), 'invalid_argument', /usage/);
  // Server values that are not finite numbers >= 0 are left out; the rest settles the estimate.
  const usage = { total_tokens: -1, junk: 'a', input_tokens: 60, output_tokens: 40, nan: NaN };
  assert.equal(limiter.handleResponse(1, id, { status: 200, headers, body: { usage } }), 'complete');
  limiter.drain();
  // 400, charged 750 at the margin's prior after one answer (1.875), fits in the 900 left.
  const next = limiter.enqueue(2, { ...chat, costs: { tokens: 400 } });
  assert.deepEqual(limiter.drain(), [{ type: 'send', id: next }, { type: 'idle' }], '900 - 100 spent leaves room');
  const huge = limiter.enqueue(3, { ...chat, costs: { tokens: 1001 } });
  assert.deepEqual(limiter.drain()[0], {
    type: 'fail', id: huge, code: 'insufficient_capacity',
    message: 'insufficient capacity: the request costs 1001 tokens, more than the limit of 1000',
    dimension: 'tokens', cost: 1001, limit: 1000,
  });
  // The simulator takes what a request really costs, and reports it.
  const server = new SimServer(JSON.stringify({
    profile: 'openai', dialect: 'openai', global: null,
    buckets: { c: { limit: 10, window_ns: 60 * S } }, routes: { 'POST /v1/chat/completions': { bucket: 'c' } },
    tokens: { cost: 100, limit: 10, window_ns: 60 * S },
  }));
  assert.deepEqual(server.handle(0, chat, 250).body, { retryAfter: null, global: null, usage: { total_tokens: 250 } });
  assert.deepEqual(server.handle(1, chat).body.usage, { total_tokens: 100 });
  assert.deepEqual(server.handle(2, chat, null).body.usage, { total_tokens: 100 });
  throwsCode(() => server.handle(3, chat, 1.5), 'invalid_argument', /tokens/);
  throwsCode(() => server.handle(3, chat, -1), 'invalid_argument', /tokens/);
  throwsCode(() => server.handle(3, chat, 'x'), 'invalid_argument', /tokens/);
  assert.equal(server.handle(4, chat, 1000).status, 429);
});

test('pollOutput gives one output at a time; getters count', () => {
  const limiter = new Limiter();
  limiter.enqueue(0, MSG);
  limiter.enqueue(0, MSG);
  assert.deepEqual(limiter.pollOutput(), { type: 'send', id: 1 });
  assert.deepEqual(limiter.pollOutput(), { type: 'idle' });
  assert.equal(limiter.queued, 1);
  assert.equal(limiter.inFlight, 1);
  assert.equal(limiter.buckets, 1);
  assert.equal(limiter.isClosed, false);
});

test('SimServer answers like Discord, 429 body included', () => {
  const server = new SimServer(JSON.stringify({
    buckets: { h: { limit: 1, window_ns: 5 * S } },
    routes: { 'POST /channels/:id/messages': { bucket: 'h' } },
  }));
  const ok = server.handle(0, MSG);
  assert.equal(ok.status, 200);
  assert.ok(ok.headers.some(([k, v]) => k === 'X-RateLimit-Bucket' && v === 'h'));
  assert.deepEqual(ok.body, { retryAfter: null, global: null });
  const limited = server.handle(1 * MS, MSG);
  assert.equal(limited.status, 429);
  assert.equal(typeof limited.body.retryAfter, 'number');
  assert.equal(JSON.parse(limited.bodyText).retry_after, limited.body.retryAfter);
  assert.equal(server.count429(), 1);
});

test('Simulation runs in virtual time and reports', () => {
  const sim = new Simulation('{}', JSON.stringify({
    buckets: { h: { limit: 5, window_ns: 5 * S } },
    routes: { 'POST /channels/:id/messages': { bucket: 'h' } },
  }), '{"seed": 7}');
  const route = { method: 'POST', path: '/channels/:id/messages', major: '1' };
  const tickets = Array.from({ length: 20 }, () => sim.enqueueAt(0, route));
  assert.deepEqual(tickets, [...tickets.keys()]);
  sim.cancelAt(1 * MS, tickets[19]);
  throwsCode(() => sim.cancelAt(0, 20), 'invalid_argument', /ticket 20/);
  const report = sim.run();
  assert.equal(report.stop, 'finished');
  assert.equal(report.succeeded, 19);
  assert.equal(report.cancelled, 1);
  assert.equal(report.count_429, 0);
  assert.equal(report.known_limit_violations, 0);
  assert.equal(report.requests.length, 20);
  assert.deepEqual(report.requests[19].outcome, { kind: 'cancelled' });
  const closing = new Simulation();
  closing.enqueueAt(0, MSG);
  closing.closeAt(0);
  assert.equal(closing.run().stop, 'finished');
});

test('readLlmRequest: the package exports the core reader (the vectors are js/test/llm.test.js)', () => {
  const body = '{"model": "gpt-4o-mini", "max_tokens": 100, "messages": [{"role": "user", "content": "Say hello in French."}]}';
  assert.deepEqual(wasm.readLlmRequest(body), { model: 'gpt-4o-mini', tokens: 106 });
  assert.deepEqual(wasm.readLlmRequest(new TextEncoder().encode(body)), { model: 'gpt-4o-mini', tokens: 106 });
  assert.equal(wasm.readLlmRequest('not json'), null);
  assert.deepEqual(raw.readLlmRequest('{"prompt": "abcd", "max_tokens": 0}'), { model: null, tokens: 1 });
  throwsCode(() => wasm.readLlmRequest(42), 'invalid_argument', /string or a Uint8Array/);
});
