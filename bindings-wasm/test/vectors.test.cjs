'use strict';
// Replays every tests/vectors/client_*.json through the package's `nodejs` build, the way the
// format in tests/vectors/README.md describes: build a Limiter from `config`, call each step's
// input at `at_ns`, compare `result`, drain and compare `outputs`, then the counts.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { Limiter } = require('ratelane-wasm');

const dir = path.join(__dirname, '..', '..', 'tests', 'vectors');
const files = fs.readdirSync(dir).filter((f) => /^client_.*\.json$/.test(f)).sort();

/** A vector's request (snake_case) as the contract's RequestSpec. */
function requestSpec(r) {
  const spec = { method: r.method, path: r.path };
  if ('major' in r) spec.major = r.major;
  if ('identity' in r) spec.identity = r.identity;
  if ('deadline_ns' in r) spec.deadlineNs = r.deadline_ns;
  if ('priority' in r) spec.priority = r.priority;
  if ('idempotent' in r) spec.idempotent = r.idempotent;
  if ('global_exempt' in r) spec.globalExempt = r.global_exempt;
  return spec;
}

function responseSpec(step) {
  const spec = { status: step.status, headers: step.headers };
  if (step.body) spec.body = { retryAfter: step.body.retry_after, global: step.body.global };
  if ('wall_clock_ms' in step) spec.wallClockMs = step.wall_clock_ms;
  return spec;
}

/** A contract Output in the vector's notation. */
function vectorOutput(o) {
  switch (o.type) {
    case 'send':
      return { send: o.id };
    case 'fail': {
      const v = { fail: o.id, code: o.code };
      if ('predictedSendAtNs' in o) v.predicted_send_at_ns = o.predictedSendAtNs;
      if ('predictedWaitNs' in o) v.predicted_wait_ns = o.predictedWaitNs;
      if ('attempts' in o) v.attempts = o.attempts;
      assert.equal(typeof o.message, 'string');
      return v;
    }
    case 'rate_limited':
      return { observe: 'rate_limited', id: o.id, scope: o.scope, retry_after_ns: o.retryAfterNs };
    case 'bucket_learned':
      return { observe: 'bucket_learned', route: o.route, bucket: o.bucket };
    case 'invalid_request_warning':
      return { observe: 'invalid_request_warning', count: o.count, limit: o.limit };
    case 'wait_until':
      return { wait_until_ns: o.atNs };
    case 'idle':
      return { idle: true };
    default:
      throw new Error(`unexpected output ${JSON.stringify(o)}`);
  }
}

/** Runs `fn`; a thrown Error with a code becomes the vector's `{error: code}`. */
function caught(fn) {
  try {
    return fn();
  } catch (e) {
    assert.ok(e instanceof Error, 'errors are Error objects');
    assert.equal(typeof e.code, 'string', `error without a code: ${e}`);
    return { error: e.code };
  }
}

function apply(limiter, step) {
  const now = step.at_ns;
  switch (step.op) {
    case 'enqueue':
      return caught(() => ({ id: limiter.enqueue(now, requestSpec(step.request)) }));
    case 'response':
      return caught(() => ({ disposition: limiter.handleResponse(now, step.id, responseSpec(step)) }));
    case 'failure':
      return caught(() => ({ disposition: limiter.handleFailure(now, step.id, step.failure) }));
    case 'cancel':
      return caught(() => (limiter.cancel(now, step.id), { ok: true }));
    case 'timeout':
      return limiter.handleTimeout(now), { ok: true };
    case 'close':
      return limiter.close(now), { ok: true };
    case 'predict':
      return caught(() => ({ send_at_ns: limiter.predict(now, requestSpec(step.request)) }));
    default:
      throw new Error(`unknown op ${step.op}`);
  }
}

test('there are client vectors to replay', () => {
  assert.ok(files.length >= 20, `only ${files.length} files in ${dir}`);
});

for (const file of files) {
  test(`vector ${file}`, () => {
    const vector = JSON.parse(fs.readFileSync(path.join(dir, file), 'utf8'));
    assert.equal(vector.kind, 'client');
    const limiter = new Limiter(JSON.stringify(vector.config));
    // The config survives the round trip through the core's JSON form.
    assert.deepEqual(JSON.parse(limiter.configJson()), vector.config);
    vector.steps.forEach((step, i) => {
      const where = `${file} step ${i} (${step.op} at ${step.at_ns})`;
      assert.deepEqual(apply(limiter, step), step.result, `${where}: result`);
      // predict is a getter: nothing to drain.
      const outputs = step.op === 'predict' ? [] : limiter.drain().map(vectorOutput);
      assert.deepEqual(outputs, step.outputs, `${where}: outputs`);
      assert.equal(limiter.queued, step.queued, `${where}: queued`);
      assert.equal(limiter.inFlight, step.in_flight, `${where}: in_flight`);
    });
    limiter.free();
  });
}
