// Shared mode of the Promise driver (js/driver.js), with in-memory fake stores: the store
// interface (js/CONTRACT.md, "The driver's store interface"), one answer per reservation,
// timeouts, late answers, stores that throw or answer garbage, observations, close. Runs on
// the napi and the wasm core alike (no Redis here: bindings-node/test/shared_redis.test.js).
// Assertions are on outcomes and counts, never on elapsed time.
'use strict'
const test = require('node:test')
const assert = require('node:assert/strict')
const { ratelane } = require('./support.cjs')

const { RateLimiter, InvalidConfigError, DeadlineExceededError, ClosedError } = ratelane

const CHANNEL = '/channels/100000000000000001/messages'

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

function deferred() {
  let resolve, reject
  const promise = new Promise((res, rej) => { resolve = res; reject = rej })
  return { promise, resolve, reject }
}

const GRANTED = { answer: 'granted' }
const never = () => new Promise(() => {})

/**
 * A store of the driver's interface, in memory. `answer(reservation, n)` (n: 1 for the first
 * reservation) gives what `reserve` returns; default: granted at once.
 */
class FakeStore {
  constructor({ timeout = 40, settings = { on_unavailable: 'fail_open' }, answer } = {}) {
    this.timeout = timeout
    this.settings = settings
    this.answer = answer || (() => Promise.resolve(GRANTED))
    this.bound = null
    this.reservations = []
    this.records = []
    this.calls = []
  }
  coreSettings() { return { ...this.settings } }
  bind(config) { this.bound = config }
  reserve(reservation) {
    this.reservations.push(reservation)
    this.calls.push('reserve')
    return this.answer(reservation, this.reservations.length)
  }
  record(update) {
    this.records.push(update)
    this.calls.push('record:' + update.kind)
  }
  flush() { this.calls.push('flush') }
  close() { this.calls.push('close') }
}

/** A send that counts its calls and answers `ok()`. */
function counter() {
  const send = () => { send.count += 1; return ok() }
  send.count = 0
  return send
}

test('shared: a store without the interface or with a bad timeout is InvalidConfigError; the core checks its settings', () => {
  const bad = [
    5,
    'redis://127.0.0.1',
    { timeout: 10 },
    Object.assign(new FakeStore(), { record: undefined }),
    new FakeStore({ timeout: 0 }),
    new FakeStore({ timeout: NaN }),
    new FakeStore({ timeout: '100' }),
    new FakeStore({ settings: { on_unavailable: 'maybe' } }),
    new FakeStore({ settings: { on_unavailable: 'fail_open', lease: 5 } }),
    Object.assign(new FakeStore(), { coreSettings: () => null }),
  ]
  for (const shared of bad) {
    assert.throws(() => new RateLimiter({ shared }), (e) => {
      assert.ok(e instanceof InvalidConfigError, `${String(shared && shared.timeout)}: ${e}`)
      assert.equal(e.code, 'invalid_config')
      return true
    })
  }
  // null and undefined mean no store.
  assert.equal(new RateLimiter({ shared: null }).config.shared, undefined)
  const store = new FakeStore({ settings: { on_unavailable: 'fail_closed', lease_ns: 7e9 } })
  const limiter = new RateLimiter({ shared: store })
  assert.equal(limiter.config.shared.on_unavailable, 'fail_closed')
  // bind() gets the settings the core validated, defaults filled in.
  assert.equal(store.bound.lease_ns, 7e9)
  for (const key of ['pioneer_poll_ns', 'state_ttl_ns', 'retry_base_ns', 'retry_max_ns']) {
    assert.equal(typeof store.bound[key], 'number', key)
  }
})

test('shared: each request is reserved once, sent once, and its response shared with the store', async () => {
  const store = new FakeStore()
  const limiter = new RateLimiter({ shared: store, identity: 'bot' })
  const send = counter()
  const results = await Promise.all([0, 1, 2].map(() => limiter.run('POST', CHANNEL, send)))
  assert.deepEqual(results.map((r) => r.status), [200, 200, 200])
  assert.equal(send.count, 3)
  assert.equal(store.reservations.length, 3)
  const r = store.reservations[0]
  assert.equal(r.identity, 'bot')
  assert.equal(typeof r.route, 'string')
  assert.equal(typeof r.countsGlobal, 'boolean')
  assert.equal(typeof r.globalLimit, 'number')
  assert.ok(store.records.some((u) => u.kind === 'bucket' && u.bucket === 'b1' && u.remaining === 4), JSON.stringify(store.records))
  await limiter.close()
  await limiter.close()
  // flush then close, once, after everything else.
  assert.deepEqual(store.calls.slice(-2), ['flush', 'close'])
  assert.equal(store.calls.filter((c) => c === 'close').length, 1)
})

test('shared: a denial holds the request for retryAfter, then it asks again', async () => {
  const store = new FakeStore({
    answer: (_, n) => Promise.resolve(n === 1 ? { answer: 'denied', retryAfterNs: 20e6, scope: 'bucket' } : GRANTED),
  })
  const limiter = new RateLimiter({ shared: store })
  const send = counter()
  const response = await limiter.run('POST', CHANNEL, send)
  assert.equal(response.status, 200)
  assert.equal(store.reservations.length, 2)
  assert.equal(send.count, 1)
  await limiter.close()
})

test('shared: a store that never answers is unavailable after its timeout; fail_open sends on local limits', async () => {
  const store = new FakeStore({ answer: never })
  const unavailable = []
  const limiter = new RateLimiter({ shared: store, onStoreUnavailable: (e) => unavailable.push(e) })
  const send = counter()
  const results = await Promise.all([0, 1].map(() => limiter.run('POST', CHANNEL, send)))
  assert.deepEqual(results.map((r) => r.status), [200, 200])
  assert.equal(send.count, 2)
  assert.ok(unavailable.length >= 1)
  assert.equal(typeof unavailable[0].id, 'number')
  assert.equal(typeof unavailable[0].retryAt, 'number')
  await limiter.close()
})

test('shared: fail_closed holds requests while the store is away, deadlines end them, recovery is observed', async () => {
  let up = false
  const store = new FakeStore({
    timeout: 20,
    settings: { on_unavailable: 'fail_closed', retry_base_ns: 10e6, retry_max_ns: 40e6 },
    answer: () => (up ? Promise.resolve(GRANTED) : never()),
  })
  const events = []
  const limiter = new RateLimiter({ shared: store, onStoreUnavailable: () => events.push('unavailable') })
  limiter.on('storeRecovered', () => events.push('recovered'))
  const send = counter()
  const withDeadline = limiter.run('POST', CHANNEL, send, { deadline: 60 })
  await assert.rejects(withDeadline, (e) => e instanceof DeadlineExceededError && e.code === 'deadline_exceeded')
  assert.equal(send.count, 0) // nothing was sent without the store's grant
  const held = limiter.run('POST', CHANNEL, send)
  // Bounded wait until the core has asked the store again at least once, then Redis is "back".
  const asked = store.reservations.length
  for (let i = 0; i < 200 && store.reservations.length < asked + 2; i++) await new Promise((r) => setTimeout(r, 5))
  assert.ok(store.reservations.length >= asked + 2, 'the core keeps probing the store')
  up = true
  assert.equal((await held).status, 200)
  assert.equal(send.count, 1)
  assert.ok(events.includes('unavailable'))
  assert.equal(events[events.length - 1], 'recovered')
  await limiter.close()
})

test('shared: a late answer is ignored: one answer per reservation, one send', async () => {
  const late = []
  const store = new FakeStore({
    timeout: 15,
    answer: () => {
      const d = deferred()
      late.push(d)
      return d.promise
    },
  })
  const limiter = new RateLimiter({ shared: store })
  const send = counter()
  const response = await limiter.run('POST', CHANNEL, send) // unavailable, then sent (fail_open)
  assert.equal(response.status, 200)
  for (const d of late) d.resolve({ answer: 'denied', retryAfterNs: 1e9, scope: 'global' })
  await new Promise((r) => setTimeout(r, 20))
  assert.equal(send.count, 1)
  assert.equal(limiter.inFlight, 0)
  assert.equal(limiter.queued, 0)
  // A denial that came too late held nothing: the next request goes at once, after its own
  // (granted) reservation.
  store.answer = () => Promise.resolve(GRANTED)
  assert.equal((await limiter.run('POST', CHANNEL, send)).status, 200)
  await limiter.close()
})

test('shared: a store that throws, rejects or answers garbage counts as unavailable; record errors stay inside', async () => {
  const answers = [
    () => { throw new Error('boom') },
    () => Promise.reject(new Error('connection lost')),
    () => Promise.resolve(undefined),
    () => Promise.resolve('granted'),
    () => Promise.resolve({ answer: 'maybe' }),
    () => Promise.resolve({ answer: 'denied', retryAfterNs: -1, scope: 'bucket' }),
    () => Promise.resolve({ answer: 'denied', retryAfterNs: 1e6, scope: 'nowhere' }),
    () => ({ answer: 'granted' }), // not a promise: taken as it is
  ]
  for (const [i, answer] of answers.entries()) {
    const store = new FakeStore({ answer, timeout: 1000 })
    store.record = () => { throw new Error('record failed') }
    const unavailable = []
    const limiter = new RateLimiter({ shared: store, onStoreUnavailable: (e) => unavailable.push(e) })
    const send = counter()
    const response = await limiter.run('POST', CHANNEL, send)
    assert.equal(response.status, 200, `answer ${i}`)
    assert.equal(send.count, 1, `answer ${i}`)
    assert.equal(unavailable.length, i === answers.length - 1 ? 0 : 1, `answer ${i}`)
    await limiter.close()
  }
  // record returning a rejected promise: nothing unhandled, nothing thrown.
  const store = new FakeStore()
  store.record = () => Promise.reject(new Error('later'))
  const limiter = new RateLimiter({ shared: store })
  assert.equal((await limiter.run('POST', CHANNEL, counter())).status, 200)
  await limiter.close()
})

test('shared: an AbortSignal while reserving rejects at once; the grant that follows sends nothing', async () => {
  const d = deferred()
  const store = new FakeStore({ timeout: 5000, answer: () => d.promise })
  const limiter = new RateLimiter({ shared: store })
  const send = counter()
  const controller = new AbortController()
  const pending = limiter.run('POST', CHANNEL, send, { signal: controller.signal })
  await new Promise((r) => setTimeout(r, 5))
  assert.equal(store.reservations.length, 1)
  controller.abort(new Error('no longer needed'))
  await assert.rejects(pending, /no longer needed/)
  d.resolve(GRANTED)
  await new Promise((r) => setTimeout(r, 10))
  assert.equal(send.count, 0)
  await limiter.close()
  assert.deepEqual(store.calls.slice(-2), ['flush', 'close'])
})

test('shared: close ends queued requests, waits for outstanding reservations, then flushes and closes the store', async () => {
  const late = deferred()
  const store = new FakeStore({ timeout: 5000, answer: () => late.promise })
  const limiter = new RateLimiter({ shared: store })
  const pending = limiter.run('POST', CHANNEL, counter())
  await new Promise((r) => setTimeout(r, 5))
  let closed = false
  const closing = limiter.close().then(() => { closed = true })
  await assert.rejects(pending, (e) => e instanceof ClosedError && e.code === 'closed')
  await new Promise((r) => setTimeout(r, 10))
  assert.equal(closed, false, 'close waits for the reservation asked (the store may have granted it)')
  assert.ok(!store.calls.includes('close'))
  late.resolve(GRANTED)
  await closing
  assert.deepEqual(store.calls.slice(-2), ['flush', 'close'])

  // The store's own timeout bounds that wait; a store failing to flush or close never rejects close().
  const silent = new FakeStore({ timeout: 20, answer: never })
  silent.flush = () => Promise.reject(new Error('flush failed'))
  silent.close = () => { throw new Error('close failed') }
  const other = new RateLimiter({ shared: silent })
  const request = assert.rejects(other.run('POST', CHANNEL, counter()), ClosedError)
  await new Promise((r) => setTimeout(r, 5))
  await other.close()
  await request
  assert.equal(other.closed, true)
})
