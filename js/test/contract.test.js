// The core surface of js/CONTRACT.md, checked on the core module under test (RATELANE_CORE):
// the names, the stable codes, invalid_argument for wrong JS values, the simulator.
'use strict'
const test = require('node:test')
const assert = require('node:assert/strict')
const { core } = require('./support.cjs')

const GET = { method: 'GET', path: '/users/@me' }

function throwsCode(fn, code) {
  assert.throws(fn, (e) => {
    assert.ok(e instanceof Error, `an Error: ${e}`)
    assert.equal(e.code, code, `${e.message}`)
    assert.equal(typeof e.message, 'string')
    return true
  })
}

test('the module exports the classes and the code lists', () => {
  for (const name of ['Limiter', 'SimServer', 'Simulation']) assert.equal(typeof core[name], 'function', name)
  assert.deepEqual([...core.FAIL_CODES], [
    'deadline_exceeded', 'max_wait_exceeded', 'retries_exhausted', 'maybe_sent', 'network_error',
    'unauthorized', 'closed',
  ])
  assert.deepEqual([...core.ERROR_CODES], [
    'unknown_request', 'invalid_state', 'invalid_config', 'invalid_request', 'limiter_closed',
  ])
})

test('Limiter: defaults, getters and the drain', () => {
  const l = new core.Limiter()
  assert.equal(JSON.parse(l.configJson()).global_limit, 50)
  assert.equal(new core.Limiter(undefined).queued, 0)
  assert.equal(new core.Limiter('{}').isClosed, false)
  const id = l.enqueue(0, GET)
  assert.equal(id, 1)
  assert.deepEqual(l.pollOutput(), { type: 'send', id: 1 })
  assert.deepEqual(l.pollOutput(), { type: 'idle' })
  assert.deepEqual(l.drain(), [{ type: 'idle' }])
  assert.equal(l.inFlight, 1)
  assert.equal(l.buckets, 1)
  assert.equal(l.handleResponse(1000, id, { status: 200, headers: [] }), 'complete')
  assert.equal(l.predict(2000, GET), 2000)
  l.close(3000)
  assert.equal(l.isClosed, true)
  throwsCode(() => l.enqueue(4000, GET), 'limiter_closed')
})

test('optional request fields accept undefined and null; a fractional nowNs is truncated', () => {
  const l = new core.Limiter()
  const id = l.enqueue(1.9, {
    method: 'get', path: '/users/@me', major: null, identity: undefined, deadlineNs: null,
    priority: null, idempotent: null, globalExempt: undefined,
  })
  assert.deepEqual(l.drain(), [{ type: 'send', id }, { type: 'idle' }])
  assert.equal(l.handleFailure(2, id, 'not_sent'), 'retry')
  const [wait] = l.drain()
  assert.equal(wait.type, 'wait_until')
  assert.ok(Number.isInteger(wait.atNs) && wait.atNs > 2)
})

test('misuse throws the core codes', () => {
  const l = new core.Limiter()
  throwsCode(() => new core.Limiter('{"globl_limit": 1}'), 'invalid_config')
  throwsCode(() => new core.Limiter('not json'), 'invalid_config')
  throwsCode(() => l.enqueue(0, { method: 'GET', path: 'no-slash' }), 'invalid_request')
  throwsCode(() => l.cancel(0, 99), 'unknown_request')
  const id = l.enqueue(0, GET)
  l.drain()
  const queued = l.enqueue(0, { method: 'POST', path: '/channels/1/messages', major: '1' })
  const second = l.enqueue(0, { method: 'POST', path: '/channels/1/messages', major: '1' })
  l.drain()
  throwsCode(() => l.handleResponse(0, second, { status: 200, headers: [] }), 'invalid_state')
  assert.equal(typeof id + typeof queued, 'numbernumber')
})

test('values of the wrong JS type or range throw invalid_argument', () => {
  const l = new core.Limiter()
  const cases = [
    () => l.enqueue('0', GET),
    () => l.enqueue(-1, GET),
    () => l.enqueue(Number.NaN, GET),
    () => l.enqueue(Infinity, GET),
    () => l.enqueue(2 ** 60, GET),
    () => l.enqueue(0, null),
    () => l.enqueue(0, 'GET /'),
    () => l.enqueue(0, { method: 5, path: '/x' }),
    () => l.enqueue(0, { path: '/x' }),
    () => l.enqueue(0, { method: 'GET', path: '/x', priority: 1.5 }),
    () => l.enqueue(0, { method: 'GET', path: '/x', deadlineNs: -5 }),
    () => l.enqueue(0, { method: 'GET', path: '/x', idempotent: 'yes' }),
    () => l.handleFailure(0, 1, 'lost'),
    () => l.handleResponse(0, 1, { status: 'ok', headers: [] }),
    () => l.handleResponse(0, 1, { status: 200, headers: [['only-a-name']] }),
    () => l.handleResponse(0, 1, { status: 200, headers: 'x: y' }),
    () => l.handleTimeout({}),
    () => l.cancel(0, -1),
  ]
  cases.forEach((fn, i) => {
    assert.throws(fn, (e) => {
      assert.equal(e.code, 'invalid_argument', `case ${i}: ${e.message}`)
      return true
    })
  })
})

test('fail outputs carry the message and the code fields', () => {
  const l = new core.Limiter('{"max_wait_ns": 1000000000}')
  const id = l.enqueue(0, { method: 'POST', path: '/channels/1/messages' })
  l.drain()
  l.handleResponse(1, id, {
    status: 200,
    headers: [['X-RateLimit-Limit', '1'], ['X-RateLimit-Remaining', '0'], ['X-RateLimit-Reset-After', '5'], ['X-RateLimit-Bucket', 'm']],
  })
  l.drain()
  const late = l.enqueue(2, { method: 'POST', path: '/channels/1/messages' })
  const [fail] = l.drain()
  assert.equal(fail.type, 'fail')
  assert.equal(fail.id, late)
  assert.equal(fail.code, 'max_wait_exceeded')
  assert.ok(fail.predictedWaitNs > 1e9)
  assert.match(fail.message, /max_wait/)
  const deadline = l.enqueue(3, { method: 'POST', path: '/channels/1/messages', deadlineNs: 10 })
  const [dl] = l.drain()
  assert.equal(dl.id, deadline)
  assert.equal(dl.code, 'deadline_exceeded')
  assert.equal(typeof dl.predictedSendAtNs, 'number')
})

test('shared mode: reserve, handleReservation, share and the store observations', () => {
  const limiter = new core.Limiter(JSON.stringify({ shared: { on_unavailable: 'fail_open' } }))
  assert.equal(limiter.reserving, 0)
  const id = limiter.enqueue(0, { method: 'POST', path: '/channels/100000000000000001/messages' })
  const [reserve, last] = limiter.drain()
  assert.equal(reserve.type, 'reserve')
  assert.equal(reserve.id, id)
  assert.equal(reserve.reservation.id, id)
  assert.equal(reserve.reservation.bucket, null)
  assert.equal(reserve.reservation.route, 'POST /channels/:id/messages')
  assert.equal(typeof reserve.reservation.globalWindowNs, 'number')
  assert.equal(last.type, 'idle')
  assert.equal(limiter.reserving, 1)
  throwsCode(() => limiter.handleReservation(1, id, 'granted'), 'invalid_argument')
  throwsCode(() => limiter.handleReservation(1, id, { answer: 'maybe' }), 'invalid_argument')
  throwsCode(() => limiter.handleReservation(1, id, { answer: 'denied', retryAfterNs: 5 }), 'invalid_argument')
  throwsCode(() => limiter.handleReservation(1, id, { answer: 'denied', retryAfterNs: 5, scope: 'x' }), 'invalid_argument')
  throwsCode(() => limiter.handleReservation(1, 999, { answer: 'granted' }), 'unknown_request')
  // The store is down: fail-open sends at once and says so.
  limiter.handleReservation(1, id, { answer: 'unavailable' })
  const outputs = limiter.drain()
  assert.deepEqual(outputs.map((o) => o.type).filter((t) => t !== 'wait_until' && t !== 'idle'), ['store_unavailable', 'send'])
  assert.equal(typeof outputs[0].retryAtNs, 'number')
  throwsCode(() => limiter.handleReservation(2, id, { answer: 'granted' }), 'invalid_state')
  limiter.handleResponse(3, id, { status: 200, headers: [['X-RateLimit-Bucket', 'abc'], ['X-RateLimit-Limit', '5'],
    ['X-RateLimit-Remaining', '4'], ['X-RateLimit-Reset-After', '1']] })
  const share = limiter.drain().find((o) => o.type === 'share')
  assert.ok(share, 'a response in shared mode is shared with the store')
  assert.equal(share.update.kind, 'bucket')
  assert.equal(share.update.bucket, 'abc')
  assert.equal(share.update.remaining, 4)
})

test('SimServer answers like Discord and counts 429s', () => {
  const server = new core.SimServer(JSON.stringify({
    buckets: { h: { limit: 1, window_ns: 1e9 } },
    routes: { 'POST /channels/:id/messages': { bucket: 'h' } },
  }))
  const request = { method: 'POST', path: '/channels/1/messages' }
  const first = server.handle(0, request)
  assert.equal(first.status, 200)
  assert.ok(first.headers.some(([k, v]) => k === 'X-RateLimit-Bucket' && v === 'h'))
  assert.deepEqual(first.body, { retryAfter: null, global: null })
  const second = server.handle(1, request)
  assert.equal(second.status, 429)
  assert.equal(second.body.global, false)
  assert.equal(typeof second.body.retryAfter, 'number')
  assert.equal(JSON.parse(second.bodyText).retry_after, second.body.retryAfter)
  assert.equal(server.count429(), 1)
  assert.throws(() => new core.SimServer('{"nope": 1}'), (e) => e.code === 'invalid_config')
})

test('Simulation runs a limiter in virtual time and reports', () => {
  const sim = new core.Simulation(
    null,
    JSON.stringify({ buckets: { h: { limit: 5, window_ns: 5e9 } }, routes: { 'POST /channels/:id/messages': { bucket: 'h' } } }),
    JSON.stringify({ seed: 42 }),
  )
  const tickets = []
  for (let i = 0; i < 30; i++) tickets.push(sim.enqueueAt(0, { method: 'POST', path: '/channels/:id/messages', major: '7' }))
  assert.deepEqual(tickets.slice(0, 3), [0, 1, 2])
  sim.cancelAt(1, tickets[29])
  const report = sim.run()
  assert.equal(report.stop, 'finished')
  assert.equal(report.succeeded, 29)
  assert.equal(report.cancelled, 1)
  assert.equal(report.count_429, 0)
  assert.equal(report.known_limit_violations, 0)
  assert.equal(report.requests.length, 30)
  assert.equal(report.requests[0].outcome.kind, 'completed')
  const closing = new core.Simulation()
  closing.enqueueAt(0, GET)
  closing.closeAt(0)
  assert.equal(closing.run().stop, 'finished')
  assert.throws(() => closing.cancelAt(0, 5), (e) => e.code === 'invalid_argument')
  assert.throws(() => new core.Simulation('{}', '{}', '{"latency": 1}'), (e) => e.code === 'invalid_config')
})
