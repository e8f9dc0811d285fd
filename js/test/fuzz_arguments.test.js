// A fuzzer for what crosses from JavaScript into the core module under test (RATELANE_CORE:
// napi or wasm), through js/driver.js (issue 44): every argument of the sans-IO Limiter and
// every field of what `send` resolves to, at every edge (NaN, +-Infinity, -0, fractions,
// negatives, 2**53 and beyond, 1e300, strings, null, objects, BigInt, symbols), in random
// sequences. A call works or throws a RatelaneError with a documented code and changes
// nothing (never a TypeError, a RangeError, a crash); a request the driver runs ends exactly
// once, no rejection escapes, and inFlight comes back to 0.
//
// Written here rather than with fast-check: a seeded generator of a few dozen lines, no new
// dependency in the package. The seed is random on every run and printed with a failure
// (RATELANE_FUZZ_SEED replays it); RATELANE_FUZZ_CASES overrides the case count. No timing
// assertions; every wait is bounded.
'use strict'
const test = require('node:test')
const assert = require('node:assert/strict')
const { inspect } = require('node:util')
const { core, ratelane } = require('./support.cjs')

const { RateLimiter, RatelaneError } = ratelane
const CASES = Number(process.env.RATELANE_FUZZ_CASES || 150)
const SEED = Number(process.env.RATELANE_FUZZ_SEED || Math.floor(Math.random() * 2 ** 31))
const CODES = new Set(['unknown_request', 'invalid_state', 'invalid_config', 'invalid_request', 'limiter_closed', 'limiter_busy',
  'snapshot_foreign', 'snapshot_version', 'snapshot_malformed', 'invalid_argument', 'insufficient_capacity'])

/** mulberry32: a small seeded generator. */
function generator(seed) {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6D2B79F5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

const GARBAGE = [NaN, Infinity, -Infinity, -0, 0.5, 1.5, -1, 2 ** 53, 2 ** 53 + 2, 2 ** 64, 1e300, -1e300, '1', '', null,
  undefined, true, {}, [], [1], () => 1, Symbol('s'), 10n, new Date(0)]

function pick(rand, list) { return list[Math.floor(rand() * list.length)] }
/** Mostly one of `valid`, sometimes anything. */
function edge(rand, valid) { return rand() < 0.75 ? pick(rand, valid) : pick(rand, GARBAGE) }

/** The driver's errors are RatelaneErrors; the sans-IO surface throws an Error with the code
 * (js/CONTRACT.md). Either way the code is a documented one. */
function typed(error, what, driver = true) {
  const name = error && error.constructor && error.constructor.name
  assert.ok(driver ? error instanceof RatelaneError : error instanceof Error, `${what}: ${name}: ${error && error.message}`)
  assert.ok(CODES.has(error.code), `${what}: ${name} with code ${error && error.code}: ${error && error.message}`)
}

function seeded(name, fn) {
  test(`${name} (seed ${SEED})`, async () => {
    try {
      await fn(generator(SEED))
    } catch (error) {
      error.message = `${error.message}\n  replay: RATELANE_FUZZ_SEED=${SEED}`
      throw error
    }
  })
}

const PATHS = ['/channels/1/messages', '/webhooks/1/tok', '/interactions/2/t/callback', '/users/@me', 'https://x/y', 'x', '']
const HEADERS = [{}, { 'x-ratelimit-remaining': '0', 'x-ratelimit-reset-after': '1e309', 'x-ratelimit-bucket': 'b' },
  { 'retry-after': '2', 'x-ratelimit-scope': 'shared' }, [['retry-after', 'NaN']], 'x-ratelimit-limit\n5', null, 7]

seeded('sans-IO: any argument is taken or refused with a typed error, and changes nothing then', (rand) => {
  for (let c = 0; c < CASES; c++) {
    const shared = rand() < 0.5
    const limiter = new core.Limiter(shared ? JSON.stringify({ shared: {} }) : undefined)
    const live = new Set()
    const ids = () => [...live].concat([0, 1, 2, 3])
    for (let step = 0; step < 30; step++) {
      const now = edge(rand, [0, 1e6, 5e9, 1e12])
      const id = edge(rand, ids())
      const before = [limiter.queued, limiter.inFlight, limiter.reserving]
      const kind = Math.floor(rand() * 9)
      try {
        switch (kind) {
          case 0: {
            const spec = { method: edge(rand, ['GET', 'POST']), path: edge(rand, PATHS) }
            if (rand() < 0.5) spec.deadlineNs = edge(rand, [1e9, 1e15])
            if (rand() < 0.3) spec.priority = edge(rand, [0, 1, -1])
            if (rand() < 0.3) spec.costs = { tokens: edge(rand, [0, 5, 1e6]) }
            if (rand() < 0.3) spec.major = edge(rand, ['1', '1/tok'])
            live.add(limiter.enqueue(now, rand() < 0.05 ? edge(rand, [null]) : spec))
            break
          }
          case 1: limiter.handleResponse(now, id, { status: edge(rand, [200, 429, 500, 404]), headers: edge(rand, HEADERS), body: rand() < 0.2 ? { retryAfter: edge(rand, [0.5]), global: edge(rand, [true]) } : undefined }); break
          case 2: limiter.handleFailure(now, id, edge(rand, ['not_sent', 'maybe_sent'])); break
          case 3: limiter.cancel(now, id); live.delete(id); break
          case 4: limiter.handleWritten(now, id); break
          case 5: limiter.handleTimeout(now); break
          case 6: limiter.handleReservation(now, id, { answer: edge(rand, ['granted', 'denied', 'unavailable']), retryAfterNs: edge(rand, [0, 5e9, 2 ** 53 - 1]), scope: edge(rand, ['global', 'route']), processes: edge(rand, [1, 2]) }); break
          case 7: assert.equal(typeof limiter.readsBody(edge(rand, [200, 429, 403])), 'boolean'); break
          default: limiter.predict(now, { method: 'GET', path: edge(rand, PATHS) })
        }
      } catch (error) {
        typed(error, `step ${step} kind ${kind}`, false)
        assert.deepEqual([limiter.queued, limiter.inFlight, limiter.reserving], before, `kind ${kind} refused, yet changed the counts`)
      }
      for (const output of limiter.drain()) {
        if (output.type === 'fail') live.delete(output.id)
      }
    }
    if (typeof limiter.free === 'function') limiter.free()
  }
})

seeded('driver: any response from send ends its request exactly once, with no escaped rejection', async (rand) => {
  const unhandled = []
  const onUnhandled = (reason) => unhandled.push(reason)
  process.on('unhandledRejection', onUnhandled)
  try {
    // Every wait short: the server's (a reset of 1e309 s is clamped to maxServerWait), the
    // retries' and the edge bans', so that a request's end is a matter of milliseconds.
    const limiter = new RateLimiter({ maxServerWait: 50, maxRateLimitRetries: 1, backoffBase: 1, backoffMax: 5, minRateLimitWait: 1,
      edgeBackoffBase: 1, edgeBackoffMax: 5 })
    for (let c = 0; c < CASES; c++) {
      const response = rand() < 0.1 ? edge(rand, [null]) : {
        status: edge(rand, [200, 204, 404, 500, 429]),
        headers: edge(rand, HEADERS),
      }
      let calls = 0
      let timer
      const outcome = await Promise.race([
        // A channel (or webhook) of its own per case: a bucket an earlier case left holding
        // (remaining 0, its window not known yet) would only make this one wait.
        limiter.run('GET', edge(rand, [`/channels/${1000 + c}/messages`, `/webhooks/${c}/tok`]), async () => {
          calls += 1
          if (calls > 1) return { status: 200, headers: {} }
          return response
        }).then(() => 'resolved', (error) => error),
        new Promise((resolve) => { timer = setTimeout(() => resolve('pending'), 10_000) }),
      ])
      clearTimeout(timer)
      assert.notEqual(outcome, 'pending', `case ${c}: the request never ended (${inspect(response)})`)
      if (outcome !== 'resolved' && !(outcome instanceof ratelane.RateLimitError)) typed(outcome, `case ${c}`)
      assert.equal(limiter.inFlight, 0, `case ${c}`)
    }
    await limiter.close()
    await new Promise((resolve) => setImmediate(resolve))
    assert.deepEqual(unhandled, [], 'no rejection escaped the driver')
  } finally {
    process.off('unhandledRejection', onUnhandled)
  }
})
