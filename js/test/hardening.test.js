// Hostile servers and hostile callers (issue 44), over the core module under test
// (RATELANE_CORE: napi or wasm) and the driver of js/driver.js:
//
// * a `send` whose response has a status the core does not take (NaN, -1, +-Infinity, 2**60,
//   1e300, 200.5, 99, 1000, a string) ends that one request with InvalidArgumentError: no
//   uncaught exception (it killed the process), no promise left pending, `inFlight` back to 0;
// * the sans-IO Limiter refuses a fractional, negative or non-finite request id with
//   `invalid_argument` (`cancel(now, 1.5)` cancelled request 1);
// * `readsBody` checks the status with the core's rule;
// * the shared store's reply reader (js/redis_store.js) refuses a million elements or ten
//   thousand levels at once, with a short message.
'use strict'
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { core, repo, ratelane } = require('./support.cjs')

const { RateLimiter, InvalidArgumentError } = ratelane

const BAD_STATUSES = [NaN, -1, Infinity, -Infinity, 2 ** 60, 1e300, 200.5, 99, 1000, '200', null, undefined, true]

test('a send that resolves to a bad status ends that request with InvalidArgumentError, nothing else', async () => {
  const unhandled = []
  const onUnhandled = (reason) => unhandled.push(reason)
  process.on('unhandledRejection', onUnhandled)
  try {
    const limiter = new RateLimiter()
    for (const status of BAD_STATUSES) {
      let timer
      const outcome = await Promise.race([
        limiter.run('GET', '/users/@me', async () => ({ status, headers: {} })).then(
          () => 'resolved',
          (error) => error,
        ),
        new Promise((resolve) => { timer = setTimeout(() => resolve('pending'), 5000) }),
      ])
      clearTimeout(timer)
      assert.ok(outcome instanceof InvalidArgumentError, `status ${String(status)}: ${String(outcome)}`)
      assert.equal(outcome.code, 'invalid_argument')
      assert.equal(limiter.inFlight, 0, `status ${String(status)}: inFlight`)
      assert.equal(limiter.queued, 0, `status ${String(status)}: queued`)
    }
    // The limiter still serves.
    const response = await limiter.run('GET', '/users/@me', async () => ({ status: 200, headers: {} }))
    assert.equal(response.status, 200)
    await limiter.close()
    await new Promise((resolve) => setImmediate(resolve))
    assert.deepEqual(unhandled, [], 'no rejection escaped the driver')
  } finally {
    process.off('unhandledRejection', onUnhandled)
  }
})

test('a fractional, negative or non-finite request id is invalid_argument, never another request', () => {
  const limiter = new core.Limiter()
  const id = limiter.enqueue(0, { method: 'GET', path: '/users/@me' })
  assert.equal(id, 1)
  limiter.drain()
  for (const bad of [1.5, 0.999, -1, NaN, Infinity, 2 ** 60]) {
    for (const call of [
      () => limiter.cancel(1, bad),
      () => limiter.handleResponse(1, bad, { status: 200, headers: {} }),
      () => limiter.handleFailure(1, bad, 'not_sent'),
      () => limiter.handleWritten(1, bad),
    ]) {
      assert.throws(call, (e) => e.code === 'invalid_argument', `id ${bad}`)
    }
  }
  assert.equal(limiter.inFlight, 1, 'request 1 was not touched')
  limiter.cancel(1, 1)
  assert.equal(limiter.inFlight, 0)
})

test('readsBody checks the status with the core rule', () => {
  const limiter = new core.Limiter()
  for (const status of [NaN, -1, Infinity, 2 ** 60, 200.5, 99, 1000]) {
    assert.throws(() => limiter.readsBody(status), (e) => e.code === 'invalid_argument', String(status))
  }
  assert.equal(typeof limiter.readsBody(429), 'boolean')
  assert.equal(typeof limiter.readsBody(100), 'boolean')
  assert.equal(typeof limiter.readsBody(999), 'boolean')
})

test('the shared store reply reader refuses huge and deep replies at once, with a short message', () => {
  const source = fs.readFileSync(path.join(repo, 'js', 'redis_store.js'), 'utf8')
  // eslint-disable-next-line no-new-func
  const createRedisStore = new Function(`${source}\nreturn createRedisStore`)()
  const script = fs.readFileSync(path.join(repo, 'redis', 'scripts', 'shared_store.lua'), 'utf8')
  const { parseAnswer } = createRedisStore({ ratelane, script })
  let deep = 1
  for (let i = 0; i < 10_000; i++) deep = [deep]
  const replies = [
    new Array(1_000_000).fill(1),
    ['granted'].concat(new Array(1_000_000).fill(1)),
    deep,
    [deep],
    ['denied', deep, 'global', 1],
    ['x'.repeat(1 << 20)],
    'x'.repeat(1 << 20),
  ]
  for (const reply of replies) {
    assert.throws(() => parseAnswer(reply), (e) => e instanceof Error && e.message.length < 300)
  }
  // A denial beyond 2^53 ns is passed on as the largest exact number (the core clamps it).
  const answer = parseAnswer(['denied', 9007199254740991, 'global', 1])
  assert.equal(answer.retryAfterNs, Number.MAX_SAFE_INTEGER)
})
