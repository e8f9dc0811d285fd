// The Promise driver (js/driver.js) over the core module under test (RATELANE_CORE), with
// in-process fake transports: options, errors, retries, waits, AbortSignal, close, events,
// timers. Assertions are on outcomes and counts, never on elapsed time.
'use strict'
const test = require('node:test')
const assert = require('node:assert/strict')
const { execFileSync } = require('node:child_process')
const path = require('node:path')
const { core, native, createRatelane, ratelane, corePath } = require('./support.cjs')

const {
  RateLimiter, RatelaneError, RateLimitError, UsageError, InvalidConfigError, InvalidArgumentError,
  InvalidRequestError, LimiterClosedError, MaxWaitExceededError, DeadlineExceededError, DeferredError,
  RetriesExhaustedError, MaybeSentError, NetworkError, ClosedError, FAIL_CLASSES, USAGE_CLASSES,
  toCoreConfig, fromCoreError, classifyFailure, headerPairs,
} = ratelane

const CHANNEL = '/channels/100000000000000001/messages'

/** A Discord 200 with bucket headers. */
function ok(remaining = 4, resetAfter = 1, limit = 5, bucket = 'b1') {
  return {
    status: 200,
    headers: {
      'x-ratelimit-limit': String(limit),
      'x-ratelimit-remaining': String(remaining),
      'x-ratelimit-reset-after': String(resetAfter),
      'x-ratelimit-bucket': bucket,
    },
  }
}

/** A Discord 429 of scope user, with its JSON body as text. */
function tooMany(retryAfter = 0.01, bucket = 'b1') {
  return {
    status: 429,
    headers: {
      'x-ratelimit-limit': '5',
      'x-ratelimit-remaining': '0',
      'x-ratelimit-reset-after': String(retryAfter),
      'x-ratelimit-bucket': bucket,
      'x-ratelimit-scope': 'user',
      'retry-after': String(Math.ceil(retryAfter)),
    },
    body: JSON.stringify({ message: 'You are being rate limited.', retry_after: retryAfter, global: false }),
  }
}

/** A promise with its resolve/reject outside. */
function deferred() {
  let resolve, reject
  const promise = new Promise((res, rej) => { resolve = res; reject = rej })
  return { promise, resolve, reject }
}

/** Lets pending promise callbacks run. */
const tick = () => new Promise((r) => setImmediate(r))

// ------------------------------------------------------------------ options

test('options: camelCase and milliseconds become the core JSON form, in one table', () => {
  const all = {
    profile: 'discord', globalLimit: 40, globalWindow: 1000, globalMarginMax: 100, maxWait: 30_000,
    maxRateLimitRetries: 2, maxErrorRetries: 4, backoffBase: 250, backoffMax: 8000,
    minRateLimitWait: 20, maxServerWait: 60_000, invalidRequestLimit: 1000,
    invalidRequestWindow: 600_000, invalidRequestStopAt: 900, invalidRequestWarnAt: 500,
    edgeBackoffBase: 1000, edgeBackoffMax: 2000, stopOnUnauthorized: false, jitterSeed: 7,
    maxRoutes: 10, bucketIdleTtl: 1500, deferAfter: 2000,
  }
  const json = toCoreConfig(all)
  assert.deepEqual(json, {
    profile: 'discord', global_limit: 40, global_window_ns: 1e9, global_margin_max_ns: 1e8,
    max_wait_ns: 3e10, max_rate_limit_retries: 2, max_error_retries: 4, backoff_base_ns: 2.5e8,
    backoff_max_ns: 8e9, min_rate_limit_wait_ns: 2e7, max_server_wait_ns: 6e10,
    invalid_request_limit: 1000, invalid_request_window_ns: 6e11, invalid_request_stop_at: 900,
    invalid_request_warn_at: 500, edge_backoff_base_ns: 1e9, edge_backoff_max_ns: 2e9,
    stop_on_unauthorized: false, jitter_seed: 7, max_routes: 10, bucket_idle_ttl_ns: 1.5e9,
    defer_after_ns: 2e9,
  })
  // The core accepts every converted key and reports it back unchanged.
  const limiter = new RateLimiter(all)
  assert.deepEqual(limiter.config, json)
  assert.equal(toCoreConfig({ maxWait: null }).max_wait_ns, null)
  assert.equal(toCoreConfig({ maxWait: Infinity }).max_wait_ns, null)
  assert.equal(toCoreConfig({ globalWindow: 0.5 }).global_window_ns, 500_000)
  assert.deepEqual(toCoreConfig(), {})
  assert.equal(new RateLimiter().config.global_limit, 50)
  assert.equal(new RateLimiter({ profile: 'github' }).config.global_limit, 0)
})

test('options: unknown names, wrong types and out-of-range values throw InvalidConfigError', () => {
  for (const bad of [
    { globalLimt: 50 }, { max_wait_ns: 1 }, { maxWait: '30s' }, { maxWait: -1 }, { globalLimit: 1.5 },
    { globalLimit: -1 }, { profile: 'slack' }, { stopOnUnauthorized: 1 }, { backoffBase: 0 },
    { globalLimit: 200_000 }, { identity: 5 }, 'fast',
  ]) {
    assert.throws(() => new RateLimiter(bad), (e) => {
      assert.ok(e instanceof InvalidConfigError, `${JSON.stringify(bad)}: ${e}`)
      assert.ok(e instanceof UsageError && e instanceof RatelaneError && e instanceof Error)
      assert.equal(e.code, 'invalid_config')
      return true
    })
  }
})

test('options: a message names the type of a wrong value and lists the valid names', () => {
  assert.throws(() => new RateLimiter({ maxWait: '30000' }),
    { name: 'InvalidConfigError', message: /maxWait must be a finite number of milliseconds >= 0, got a string \("30000"\)/ })
  assert.throws(() => new RateLimiter({ globalLimit: 2.5 }), { message: /got 2\.5$/ })
  assert.throws(() => new RateLimiter({ stopOnUnauthorized: 'yes' }), { message: /must be a boolean, got a string \("yes"\)/ })
  assert.throws(() => new RateLimiter({ timeot: 5 }), (e) => {
    assert.ok(e instanceof InvalidConfigError)
    assert.match(e.message, /unknown option "timeot"; expected one of: profile, .*maxWait.*identity, shared, onRateLimited/)
    return true
  })
})

test('run options: an unknown name or a wrong type rejects with InvalidArgumentError, nothing is sent', async () => {
  const limiter = new RateLimiter()
  let sent = 0
  const send = () => { sent += 1; return ok() }
  const cases = [
    [{ timeot: 5 }, /^unknown option "timeot"; expected one of: signal, deadline, deferAfter, major, identity, priority, idempotent, globalExempt, subLimit, bodyKeys, costs, model/],
    [{ deadline: '5000' }, /^deadline must be a number of ms >= 0, got a string \("5000"\)$/],
    [{ deferAfter: true }, /^deferAfter must be a finite number of ms >= 0, got true$/],
    [{ priority: '1' }, /^priority must be an integer, got a string \("1"\)$/],
    [{ idempotent: 'yes' }, /^idempotent must be a boolean, got a string/],
    [{ major: 5 }, /^major must be a string, got 5$/],
    [{ signal: {} }, /^signal must be an AbortSignal, got an object$/],
    [{ costs: [1] }, /^request\.costs must be an object of dimension names to whole numbers .*, got an array$/],
    ['fast', /^options must be an object, got a string$/],
  ]
  for (const [options, message] of cases) {
    await assert.rejects(limiter.run('GET', CHANNEL, send, options), (e) => {
      assert.ok(e instanceof InvalidArgumentError, `${JSON.stringify(options)}: ${e}`)
      assert.equal(e.code, 'invalid_argument')
      assert.match(e.message, message)
      return true
    })
    assert.throws(() => limiter.predictWait('GET', CHANNEL, options), InvalidArgumentError)
  }
  assert.equal(sent, 0)
  // null and undefined are absent, as before.
  await limiter.run('GET', CHANNEL, send, { deadline: null, major: undefined, signal: null })
  assert.equal(sent, 1)
  await limiter.close()
})

test('options: shared takes a store object, not core settings (js/test/shared.test.js has the rest)', () => {
  assert.throws(() => new RateLimiter({ shared: { onUnavailable: 'fail_open' } }), (e) => {
    assert.ok(e instanceof InvalidConfigError, `${e}`)
    assert.equal(e.code, 'invalid_config')
    assert.match(e.message, /shared must be a store with the methods .*missing: coreSettings/)
    return true
  })
  assert.throws(() => toCoreConfig({ shared: {} }), (e) => e instanceof InvalidConfigError && /store object/.test(e.message))
})

// ------------------------------------------------------------------ errors

test('errors: every core code has a class, and a new code fails at load time', () => {
  for (const code of core.FAIL_CODES) {
    const cls = FAIL_CLASSES[code]
    assert.ok(cls, code)
    const e = new cls(code, 'm', { method: 'GET', path: '/x', predictedWait: 1 })
    assert.ok(e instanceof RateLimitError && e instanceof RatelaneError && e instanceof Error)
    assert.equal(e.code, code)
    assert.equal(e.name, cls.name)
  }
  assert.deepEqual(Object.keys(FAIL_CLASSES).sort(), [...core.FAIL_CODES].sort())
  for (const code of core.ERROR_CODES) {
    assert.ok(USAGE_CLASSES[code], code)
  }
  const fake = { FAIL_CODES: [...core.FAIL_CODES, 'brand_new'], ERROR_CODES: core.ERROR_CODES }
  assert.throws(() => createRatelane(fake), /brand_new/)
  const fake2 = { FAIL_CODES: core.FAIL_CODES, ERROR_CODES: [...core.ERROR_CODES, 'other_misuse'] }
  assert.throws(() => createRatelane(fake2), /other_misuse/)
})

test('errors: the core throws Errors with codes; fromCoreError gives the class', () => {
  let thrown
  try {
    new core.Limiter('{"globl_limit": 1}')
  } catch (e) {
    thrown = e
  }
  assert.ok(thrown instanceof Error)
  assert.equal(thrown.code, 'invalid_config')
  const converted = fromCoreError(thrown)
  assert.ok(converted instanceof InvalidConfigError)
  assert.equal(converted.cause, thrown)
  assert.match(converted.message, /globl_limit/)
  const other = new TypeError('x')
  assert.equal(fromCoreError(other), other)
})

// ------------------------------------------------------------------ run

test('run resolves with the response and tells send its attempt', async () => {
  const limiter = new RateLimiter()
  const seen = []
  const res = await limiter.run('POST', CHANNEL, (ctx) => { seen.push(ctx.attempt, typeof ctx.signal); return ok() })
  assert.equal(res.status, 200)
  assert.deepEqual(seen, [1, 'object'])
  assert.equal(limiter.queued + limiter.inFlight, 0)
  await limiter.close()
})

test('a 429 is handed to the core with its body; the retry succeeds; events fire', async () => {
  const limiter = new RateLimiter({ minRateLimitWait: 1 })
  const limited = []
  const learned = []
  limiter.on('rateLimited', (e) => limited.push(e))
  limiter.on('bucketLearned', (e) => learned.push(e))
  let calls = 0
  const res = await limiter.run('POST', CHANNEL, () => (++calls === 1 ? tooMany(0.02) : ok()))
  assert.equal(res.status, 200)
  assert.equal(calls, 2)
  assert.equal(limited.length, 1)
  assert.equal(limited[0].scope, 'bucket')
  assert.equal(limited[0].method, 'POST')
  assert.ok(limited[0].retryAfter >= 20, `retryAfter ${limited[0].retryAfter} ms`)
  assert.deepEqual(learned, [{ route: 'POST /channels/:id/messages', bucket: 'b1' }])
  await limiter.close()
})

test('429 retries are bounded: RetriesExhaustedError with the last response', async () => {
  const limiter = new RateLimiter({ maxRateLimitRetries: 1, minRateLimitWait: 1 })
  let calls = 0
  await assert.rejects(limiter.run('POST', CHANNEL, () => { calls++; return tooMany(0.005) }), (e) => {
    assert.ok(e instanceof RetriesExhaustedError)
    assert.equal(e.code, 'retries_exhausted')
    assert.equal(e.attempts, 2)
    assert.equal(e.response.status, 429)
    assert.equal(e.method, 'POST')
    return true
  })
  assert.equal(calls, 2)
  await limiter.close()
})

test('maxWait and deadlines fail at once with the predicted wait', async () => {
  const limiter = new RateLimiter({ maxWait: 1000 })
  await limiter.run('POST', CHANNEL, () => ok(0, 5)) // bucket exhausted for 5 s
  let sent = 0
  await assert.rejects(limiter.run('POST', CHANNEL, () => { sent++; return ok() }), (e) => {
    assert.ok(e instanceof MaxWaitExceededError)
    assert.equal(e.code, 'max_wait_exceeded')
    assert.ok(e.predictedWait > 1000 && e.predictedWait <= 5000, `predictedWait ${e.predictedWait}`)
    return true
  })
  const other = new RateLimiter()
  await other.run('POST', CHANNEL, () => ok(0, 5))
  await assert.rejects(other.run('POST', CHANNEL, () => { sent++; return ok() }, { deadline: 100 }), (e) => {
    assert.ok(e instanceof DeadlineExceededError)
    assert.equal(typeof e.predictedSendAt, 'number')
    assert.ok(e.predictedWait > 100, `predictedWait ${e.predictedWait}`)
    return true
  })
  assert.equal(sent, 0)
  assert.ok(other.predictWait('POST', CHANNEL) > 1000)
  assert.equal(other.predictWait('GET', '/users/@me'), 0)
  await limiter.close()
  await other.close()
})

test('deferAfter fails at once with DeferredError and retryAt on both clocks', async () => {
  const limiter = new RateLimiter({ deferAfter: 1000 }) // the default for every run
  await limiter.run('POST', CHANNEL, () => ok(0, 5)) // bucket exhausted for 5 s
  let sent = 0
  const before = { mono: performance.now(), wall: Date.now() }
  await assert.rejects(limiter.run('POST', CHANNEL, () => { sent++; return ok() }), (e) => {
    assert.ok(e instanceof DeferredError && e instanceof RateLimitError)
    assert.equal(e.code, 'deferred')
    assert.equal(FAIL_CLASSES.deferred, DeferredError)
    assert.ok(e.retryAt - before.mono > 4000 && e.retryAt - before.mono <= 5100, `retryAt ${e.retryAt}`)
    assert.ok(e.retryAfter > 4000 && e.retryAfter <= 5000, `retryAfter ${e.retryAfter}`)
    assert.ok(e.retryAtMs - before.wall > 4000 && e.retryAtMs - Date.now() <= 5000, `retryAtMs ${e.retryAtMs}`)
    assert.ok(e.retryAtDate instanceof Date)
    assert.equal(e.retryAtDate.getTime(), e.retryAtMs)
    return true
  })
  // A longer budget on the request waits (aborted here); a deadline before the send wins.
  const controller = new AbortController()
  const waiting = limiter.run('POST', CHANNEL, () => { sent++; return ok() }, { deferAfter: 60_000, signal: controller.signal })
  assert.equal(limiter.queued, 1)
  controller.abort(new Error('stop'))
  await assert.rejects(waiting, /stop/)
  await assert.rejects(limiter.run('POST', CHANNEL, () => ok(), { deferAfter: 60_000, deadline: 100 }), DeadlineExceededError)
  for (const bad of [-1, NaN, Infinity, '1000']) {
    await assert.rejects(limiter.run('POST', CHANNEL, () => ok(), { deferAfter: bad }), (e) =>
      e instanceof InvalidArgumentError && e.code === 'invalid_argument' && /deferAfter/.test(e.message))
  }
  assert.equal(limiter.queued, 0)
  for (const bad of [-1, NaN, '1000']) {
    assert.throws(() => new RateLimiter({ deferAfter: bad }), InvalidConfigError)
  }
  assert.equal(sent, 0)
  await limiter.close()
})

test('an AbortSignal cancels a queued request and gives its place back', async () => {
  const limiter = new RateLimiter()
  const pioneer = deferred()
  const first = limiter.run('POST', CHANNEL, () => pioneer.promise)
  const controller = new AbortController()
  let secondSent = 0
  const second = limiter.run('POST', CHANNEL, () => { secondSent++; return ok() }, { signal: controller.signal })
  await tick()
  assert.equal(limiter.queued, 1) // waits for the pioneer's headers
  controller.abort()
  await assert.rejects(second, (e) => e.name === 'AbortError')
  assert.equal(limiter.queued, 0)
  pioneer.resolve(ok())
  assert.equal((await first).status, 200)
  assert.equal(secondSent, 0)
  // An already aborted signal rejects without enqueueing.
  await assert.rejects(limiter.run('GET', '/users/@me', () => ok(), { signal: AbortSignal.abort() }), (e) => e.name === 'AbortError')
  await limiter.close()
})

test('an AbortSignal aborts a request in flight through the signal send got', async () => {
  const limiter = new RateLimiter()
  const controller = new AbortController()
  let inner
  const run = limiter.run('GET', '/users/@me', ({ signal }) => {
    inner = signal
    return new Promise((_, reject) => signal.addEventListener('abort', () => reject(signal.reason)))
  }, { signal: controller.signal })
  await tick()
  assert.equal(limiter.inFlight, 1)
  controller.abort(new Error('user gave up'))
  await assert.rejects(run, /user gave up/)
  assert.equal(inner.aborted, true)
  assert.equal(limiter.inFlight, 0)
  await limiter.close()
})

test('one signal on many requests: one listener, every request aborted, none left behind', async () => {
  const { getEventListeners } = require('node:events')
  const a = new RateLimiter()
  const b = new RateLimiter()
  const shared = new AbortController()
  const pioneer = deferred()
  const inFlight = a.run('POST', CHANNEL, () => pioneer.promise, { signal: shared.signal })
  const queued = [1, 2, 3].map(() => a.run('POST', CHANNEL, () => ok(), { signal: shared.signal }))
  const other = b.run('GET', '/users/@me', () => new Promise(() => {}), { signal: shared.signal })
  await tick()
  assert.equal(getEventListeners(shared.signal, 'abort').length, 1)
  shared.abort(new Error('shutting down'))
  for (const p of [inFlight, ...queued, other]) await assert.rejects(p, /shutting down/)
  assert.equal(a.queued + a.inFlight + b.inFlight, 0)
  // Settled requests leave nothing on a signal that lives on.
  const kept = new AbortController()
  const done = await Promise.all([1, 2, 3].map((i) => a.run('GET', `/guilds/${i}`, () => ok(4, 1, 5, `g${i}`), { signal: kept.signal })))
  assert.deepEqual(done.map((r) => r.status), [200, 200, 200])
  assert.equal(getEventListeners(kept.signal, 'abort').length, 0)
  await Promise.all([a.close(), b.close()])
})

test('the signal send got: one per attempt, and aborted even when read after the abort', async () => {
  const limiter = new RateLimiter()
  const controller = new AbortController()
  const gate = deferred()
  let late
  const run = limiter.run('GET', '/users/@me', async (context) => {
    await gate.promise // the caller aborts before this send looks at its signal
    late = context.signal
    assert.equal(context.signal, late, 'reading it twice gives one signal')
    return ok()
  }, { signal: controller.signal })
  await tick()
  controller.abort(new Error('changed my mind'))
  await assert.rejects(run, /changed my mind/)
  gate.resolve()
  await tick()
  assert.equal(late.aborted, true)
  assert.match(String(late.reason), /changed my mind/)
  await limiter.close()
  // Without a caller's signal the signal is still a real, unaborted one, new per attempt.
  const retrying = new RateLimiter({ backoffBase: 1, backoffMax: 2 })
  const signals = []
  let calls = 0
  await retrying.run('GET', '/users/@me', ({ signal, attempt }) => {
    signals.push(signal)
    calls += 1
    return attempt === 1 ? { status: 500, headers: {} } : ok()
  })
  assert.equal(calls, 2)
  assert.ok(signals[0] instanceof AbortSignal && signals[1] instanceof AbortSignal)
  assert.notEqual(signals[0], signals[1])
  assert.equal(signals[0].aborted || signals[1].aborted, false)
  await retrying.close()
})

test('close rejects queued requests, refuses new ones and waits for those in flight', async () => {
  const limiter = new RateLimiter()
  const pioneer = deferred()
  const first = limiter.run('POST', CHANNEL, () => pioneer.promise)
  const queued = [1, 2, 3].map(() => limiter.run('POST', CHANNEL, () => ok()))
  await tick()
  let closedResolved = false
  const closing = limiter.close().then(() => { closedResolved = true })
  for (const q of queued) {
    await assert.rejects(q, (e) => e instanceof ClosedError && e.code === 'closed')
  }
  await assert.rejects(limiter.run('GET', '/users/@me', () => ok()), (e) => e instanceof LimiterClosedError && e.code === 'limiter_closed')
  await tick()
  assert.equal(closedResolved, false)
  pioneer.resolve(ok())
  assert.equal((await first).status, 200)
  await closing
  assert.equal(limiter.closed, true)
})

/** Busy-waits `ms` milliseconds: a send as costly to make as a cold fetch() in a burst. */
function spin(ms) {
  const until = performance.now() + ms
  while (performance.now() < until) { /* the cost of making the request */ }
}

/** Counts turns of the event loop (setImmediate to setImmediate) until `stop()`. */
function turnCounter() {
  const counter = { turn: 0, running: true }
  const next = () => { if (counter.running) { counter.turn += 1; setImmediate(next) } }
  setImmediate(next)
  counter.stop = () => { counter.running = false }
  return counter
}

test('a burst of costly sends starts over several turns, in the core\'s order, each exactly once', async () => {
  const limiter = new RateLimiter()
  const turns = turnCounter()
  const started = []
  const n = 40
  const all = []
  for (let i = 0; i < n; i++) {
    // Different channels: 40 pioneers, every one let go by the core at once.
    all.push(limiter.run('POST', `/channels/${1000 + i}/messages`, () => {
      started.push({ i, turn: turns.turn })
      spin(0.5)
      return ok(4, 1, 5, `b${i}`)
    }))
  }
  const inSubmittingTurn = started.length
  try {
    await Promise.all(all)
  } finally {
    turns.stop()
  }
  // Only what fits in one turn's budget started before the submitting code returned.
  assert.ok(inSubmittingTurn >= 1 && inSubmittingTurn < n, `started in the submitting turn: ${inSubmittingTurn}`)
  assert.deepEqual(started.map((s) => s.i), [...Array(n).keys()])
  assert.ok(started[n - 1].turn > started[0].turn, 'the last send started on a later turn than the first')
  await limiter.close()
})

test('close ends the sends not started yet with ClosedError, and never starts them', async () => {
  const limiter = new RateLimiter()
  const started = []
  const all = []
  for (let i = 0; i < 30; i++) {
    all.push(limiter.run('POST', `/channels/${2000 + i}/messages`, () => {
      started.push(i)
      spin(0.5)
      return ok(4, 1, 5, `c${i}`)
    }).then((r) => r.status, (e) => e))
  }
  const startedBeforeClose = started.length
  assert.ok(startedBeforeClose < 30)
  await limiter.close()
  const outcomes = await Promise.all(all)
  assert.equal(started.length, startedBeforeClose, 'nothing started after close')
  for (let i = 0; i < 30; i++) {
    if (i < startedBeforeClose) assert.equal(outcomes[i], 200)
    else assert.ok(outcomes[i] instanceof ClosedError && outcomes[i].code === 'closed', `request ${i}: ${outcomes[i]}`)
  }
})

test('a request aborted before its deferred send started gives its global token back', async () => {
  // A global budget of 4 a minute. Each send takes 1.5 ms, so the submitting turn starts two
  // and puts the other two off to the next turns (START_BUDGET_MS).
  const limiter = new RateLimiter({ globalLimit: 4, globalWindow: 60_000 })
  const started = []
  const controllers = []
  const all = []
  for (let i = 0; i < 4; i++) {
    const controller = new AbortController()
    controllers.push(controller)
    all.push(limiter.run('POST', `/channels/${3000 + i}/messages`, () => {
      started.push(i)
      spin(1.5)
      return ok(4, 1, 5, `d${i}`)
    }, { signal: controller.signal }).then((r) => r.status, (e) => e))
  }
  assert.ok(started.length < 4, `started in the submitting turn: ${started.length}`)
  const reason = new Error('the caller gave up')
  controllers[3].abort(reason)
  // The token came back: a fifth request may go at once, not a minute later.
  assert.equal(limiter.predictWait('POST', '/channels/3999/messages'), 0)
  const outcomes = await Promise.all(all)
  assert.deepEqual(outcomes.slice(0, 3), [200, 200, 200])
  assert.equal(outcomes[3], reason)
  assert.ok(!started.includes(3), 'the aborted send never started')
  assert.equal(limiter.inFlight, 0)
  await limiter.close()
})

test('transport failures: not_sent is retried, maybe_sent POST fails, NetworkError after the budget', async () => {
  const refused = () => Object.assign(new TypeError('fetch failed'), { cause: Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }) })
  const limiter = new RateLimiter({ backoffBase: 1, backoffMax: 2, maxErrorRetries: 2 })
  let calls = 0
  const res = await limiter.run('POST', CHANNEL, () => { if (++calls === 1) throw refused(); return ok() })
  assert.equal(res.status, 200)
  assert.equal(calls, 2)

  const reset = Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' })
  await assert.rejects(limiter.run('POST', '/channels/100000000000000002/messages', () => Promise.reject(reset)), (e) => {
    assert.ok(e instanceof MaybeSentError)
    assert.equal(e.cause, reset)
    return true
  })
  let gets = 0
  const got = await limiter.run('GET', '/users/@me', () => (++gets === 1 ? Promise.reject(reset) : ok()))
  assert.equal(got.status, 200)
  assert.equal(gets, 2)

  await assert.rejects(limiter.run('GET', '/guilds/100000000000000003', () => Promise.reject(refused())), (e) => {
    assert.ok(e instanceof NetworkError)
    assert.equal(e.attempts, 3)
    assert.equal(e.cause.cause.code, 'ECONNREFUSED')
    return true
  })
  await limiter.close()
})

test('classifyFailure: only proof that nothing was written is not_sent', () => {
  const withCode = (code) => Object.assign(new Error(code), { code })
  for (const code of ['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'UND_ERR_CONNECT_TIMEOUT', 'EHOSTUNREACH']) {
    assert.equal(classifyFailure(withCode(code)), 'not_sent', code)
    assert.equal(classifyFailure(new TypeError('fetch failed', { cause: withCode(code) })), 'not_sent', code)
  }
  for (const code of ['ECONNRESET', 'EPIPE', 'UND_ERR_SOCKET', 'ETIMEDOUT', undefined]) {
    assert.equal(classifyFailure(withCode(code)), 'maybe_sent', String(code))
  }
  assert.equal(classifyFailure(new AggregateError([withCode('ECONNREFUSED'), withCode('ECONNREFUSED')])), 'not_sent')
  assert.equal(classifyFailure(Object.assign(new Error('x'), { ratelaneFailure: 'not_sent' })), 'not_sent')
  assert.equal(classifyFailure(null), 'maybe_sent')
})

test('headerPairs reads fetch Headers, Maps, arrays and plain objects', () => {
  const h = new Headers({ 'X-RateLimit-Limit': '5' })
  assert.deepEqual(headerPairs(h), [['x-ratelimit-limit', '5']])
  assert.deepEqual(headerPairs(new Map([['a', '1']])), [['a', '1']])
  assert.deepEqual(headerPairs([['a', 1]]), [['a', '1']])
  assert.deepEqual(headerPairs({ a: ['1', '2'], b: 3, c: undefined }), [['a', '1'], ['a', '2'], ['b', '3']])
  assert.deepEqual(headerPairs(undefined), [])
})

test('misuse rejects with typed errors and leaves nothing behind', async () => {
  const limiter = new RateLimiter()
  await assert.rejects(limiter.run('POST', CHANNEL, 'not a function'), InvalidArgumentError)
  await assert.rejects(limiter.run('GET POST', '/x', () => ok()), (e) => e instanceof InvalidRequestError && e.code === 'invalid_request')
  await assert.rejects(limiter.run('GET', '/x', () => ok(), { signal: {} }), InvalidArgumentError)
  await assert.rejects(limiter.run('GET', '/users/@me', () => ({ nope: true })), InvalidArgumentError)
  const hostile = { get forEach() { throw new Error('boom') }, get: () => null }
  await assert.rejects(limiter.run('GET', '/users/@me', () => ({ status: 200, headers: hostile })), InvalidArgumentError)
  assert.throws(() => limiter.on('rateLimited', 5), InvalidArgumentError)
  assert.equal(limiter.queued + limiter.inFlight, 0)
  await limiter.close()
})

test('callbacks in the options receive the events', async () => {
  const learned = []
  const limiter = new RateLimiter({ onBucketLearned: (e) => learned.push(e.bucket) })
  await limiter.run('POST', CHANNEL, () => ok(4, 1, 5, 'zz'))
  assert.deepEqual(learned, ['zz'])
  await limiter.close()
})

// ------------------------------------------------------------------ the timer

test('one timer: kept alive while something is queued, unref\'d when only housekeeping is left', async () => {
  const limiter = new RateLimiter({ minRateLimitWait: 1 })
  await limiter.run('POST', CHANNEL, () => ok(0, 0.05))
  // The bucket is exhausted for 50 ms: the next request waits on the timer.
  const waiting = limiter.run('POST', CHANNEL, () => ok(4, 1))
  await tick()
  assert.equal(limiter.queued, 1)
  assert.notEqual(limiter._timer, null)
  if (typeof limiter._timer === 'object') assert.equal(limiter._timer.hasRef(), true)
  await waiting
  // Only bucket eviction is left: the timer must not keep the process alive.
  if (limiter._timer !== null && typeof limiter._timer === 'object') {
    assert.equal(limiter._timer.hasRef(), false)
  }
  await limiter.close()
  assert.equal(limiter._timer, null)
})

test('a queued request keeps the process alive until it is sent', () => {
  const script = `
    const { ratelane } = require(${JSON.stringify(path.join(__dirname, 'support.cjs'))})
    const limiter = new ratelane.RateLimiter()
    const ok = (remaining, resetAfter) => ({ status: 200, headers: { 'x-ratelimit-limit': '1', 'x-ratelimit-remaining': String(remaining), 'x-ratelimit-reset-after': String(resetAfter), 'x-ratelimit-bucket': 'k' } })
    let sent = 0
    limiter.run('POST', '/channels/1/messages', () => { sent++; return ok(0, 0.2) })
    limiter.run('POST', '/channels/1/messages', () => { sent++; return ok(0, 0.2) })
      .then(() => console.log('sent ' + sent))
  `
  const out = execFileSync(process.execPath, ['-e', script], {
    env: { ...process.env, RATELANE_CORE: corePath },
    encoding: 'utf8',
    timeout: 20_000,
  })
  assert.equal(out.trim(), 'sent 2')
})

test('the driver source loads as CommonJS and as an ES module with one appended line', async () => {
  const fs = require('node:fs')
  const os = require('node:os')
  const { pathToFileURL } = require('node:url')
  const source = fs.readFileSync(path.join(__dirname, '..', 'driver.js'), 'utf8')
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ratelane-driver-'))
  try {
    fs.writeFileSync(path.join(dir, 'driver.cjs'), `${source}\nmodule.exports = { createRatelane }\n`)
    fs.writeFileSync(path.join(dir, 'driver.mjs'), `${source}\nexport { createRatelane }\n`)
    const fromCjs = require(path.join(dir, 'driver.cjs')).createRatelane(native)
    const fromEsm = (await import(pathToFileURL(path.join(dir, 'driver.mjs')).href)).createRatelane(native)
    for (const r of [fromCjs, fromEsm]) {
      const limiter = new r.RateLimiter()
      const res = await limiter.run('GET', '/users/@me', () => ({ status: 204, headers: {} }))
      assert.equal(res.status, 204)
      await limiter.close()
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
})
