// The core surface of js/CONTRACT.md, checked on the core module under test (RATELANE_CORE):
// the names, the stable codes, invalid_argument for wrong JS values, the simulator.
'use strict'
const test = require('node:test')
const assert = require('node:assert/strict')
const { core, native, ratelane } = require('./support.cjs')

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
  for (const name of ['Limiter', 'SimServer', 'Simulation', 'GcraStore', 'LeakyBucketStore', 'FixedWindowStore']) {
    assert.equal(typeof core[name], 'function', name)
    assert.equal(ratelane[name], core[name], `createRatelane passes ${name} through`)
  }
  assert.deepEqual([...core.FAIL_CODES], [
    'deadline_exceeded', 'max_wait_exceeded', 'deferred', 'retries_exhausted', 'maybe_sent', 'network_error',
    'unauthorized', 'closed', 'insufficient_capacity',
  ])
  assert.deepEqual([...core.ERROR_CODES], [
    'unknown_request', 'invalid_state', 'invalid_config', 'invalid_request', 'limiter_closed',
    'limiter_busy', 'snapshot_foreign', 'snapshot_version', 'snapshot_malformed',
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

test('Limiter.invalidRequests: the 403s within the window, read without changing anything', () => {
  const l = new core.Limiter(JSON.stringify({ invalid_request_window_ns: 600e9 }))
  assert.equal(l.invalidRequests(0), 0)
  const id = l.enqueue(0, GET)
  l.drain()
  assert.equal(l.handleResponse(1000, id, { status: 403, headers: [] }), 'complete')
  l.drain()
  assert.equal(l.invalidRequests(1000), 1)
  assert.equal(l.invalidRequests(600e9 + 999), 1)
  assert.equal(l.invalidRequests(600e9 + 1000), 0)
  assert.equal(l.invalidRequests(2000), 1)
  throwsCode(() => l.invalidRequests(-1), 'invalid_argument')
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
  const n = new native.Limiter()
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
    () => l.enqueue(0, { method: 'GET', path: '/x', costs: { tokens: -1 } }),
    () => l.enqueue(0, { method: 'GET', path: '/x', costs: 'tokens' }),
    () => l.handleResponse(0, 1, { status: 200, headers: [], body: { usage: 'lots' } }),
    () => l.handleFailure(0, 1, 'lost'),
    () => l.handleResponse(0, 1, { status: 'ok', headers: [] }),
    () => l.handleResponse(0, 1, { status: 200, headers: [['only-a-name']] }),
    () => l.handleResponse(0, 1, { status: 200, headers: 'x: y' }),
    () => l.handleTimeout({}),
    () => l.cancel(0, -1),
    () => n.enqueueParts(0, 5, '/x'),
    () => n.enqueueParts(0, 'GET', null),
    () => n.enqueueParts('0', 'GET', '/x'),
    () => n.enqueueParts(0, 'GET', '/x', 5),
    () => n.enqueueParts(0, 'GET', '/x', null, null, 'soon'),
    () => n.enqueueParts(0, 'GET', '/x', null, null, null, null, 1.5),
    () => n.enqueueParts(0, 'GET', '/x', null, null, null, null, null, 'yes'),
    () => n.enqueueParts(0, 'GET', '/x', null, null, null, null, null, null, null, null, null, ['tokens'], [-1]),
    () => n.respond(0, 1, '200', ''),
    () => n.respond(0, 1, 99, ''),
    () => n.respond(0, 1, 200.5, ''),
    () => n.respond(0, 1, 200, 'only-a-name'),
    () => n.respond(0, 1, 200, ['only-a-name']),
    () => n.respond(0, 1, 200, 5),
    () => n.respond(0, 1, 200, '', -1),
    () => n.respond(0, 1, 200, '', null, '1'),
    () => n.respond(0, 1, 200, '', null, null, 'yes'),
    () => n.respond(-1, 1, 200, ''),
    () => n.answerReservation(0, 1, 'maybe'),
    () => n.answerReservation(0, 1, 'denied', null, null, null, 5),
  ]
  cases.forEach((fn, i) => {
    assert.throws(fn, (e) => {
      assert.equal(e.code, 'invalid_argument', `case ${i}: ${e.message}`)
      return true
    })
  })
})

test('the positional surface: the same answers as the object forms; a packed drain holds rare outputs', () => {
  const l = new native.Limiter('{"max_wait_ns": 1000000000}')
  const id = l.enqueueParts(0, 'POST', '/channels/1/messages', null)
  assert.deepEqual([...l.drainPacked()], [0, id, 2, 0])
  assert.equal(l.respond(1, id, 200,
    'X-RateLimit-Limit\n1\nX-RateLimit-Remaining\n0\nX-RateLimit-Reset-After\n5\nX-RateLimit-Bucket\nm', 1700000000000), 'complete')
  // bucket_learned is held: kind 3, then takeHeld() hands it over as the core's serde form.
  assert.deepEqual([...l.drainPacked()], [3, 0])
  assert.deepEqual(JSON.parse(l.takeHeld()),
    { output: { observe: { type: 'bucket_learned', route: 'POST /channels/:id/messages', bucket: 'm' } } })
  assert.equal(l.takeHeld() ?? null, null, 'taken once')
  assert.deepEqual([...l.drainPacked()], [2, 0])
  const late = l.enqueueParts(2, 'POST', '/channels/1/messages')
  assert.deepEqual([...l.drainPacked()], [3, 0])
  const held = JSON.parse(l.takeHeld())
  assert.equal(held.output.fail[0], late)
  assert.equal(held.output.fail[1].code, 'max_wait_exceeded')
  assert.match(held.message, /max_wait/)
  assert.deepEqual([...l.drainPacked()], [2, 0])
  const other = new native.Limiter()
  const a = other.enqueueParts(0, 'GET', '/users/@me', 'bot')
  const b = other.enqueueParts(0, 'GET', '/users/@me', undefined, null, null, null, 3, true, false, null, ['name'], ['tokens'], [0])
  assert.deepEqual([...other.drainPacked()], [0, a, 0, b, 2, 0])
  assert.equal(other.respond(1, a, 204, ''), 'complete')
  assert.equal(other.respond(1, b, 500, ['a\nb', '', 'c', 'd'], undefined, null, undefined, [1, null, 5, 4, 1], ['e'], ['total_tokens'], [3]), 'retry')
  assert.equal(other.drainPacked()[0], 1, 'the 5xx retry waits')
})

test('drainInto writes the packed drain into a buffer, and goes on where a full buffer stopped', () => {
  // Two limiters fed the same inputs: one drained by drainPacked, one by drainInto through a
  // buffer of one pair, so that every drain longer than one output fills it.
  const a = new native.Limiter()
  const b = new native.Limiter()
  const buf = new Float64Array(2)
  const into = (one) => {
    const pairs = []
    for (;;) {
      const n = b.drainInto(buf, one)
      assert.equal(n, 2)
      pairs.push(buf[0], buf[1])
      if (one || buf[0] !== 0) return pairs
    }
  }
  const ids = []
  for (let i = 0; i < 5; i++) ids.push([a.enqueueParts(0, 'GET', `/users/${i}`), b.enqueueParts(0, 'GET', `/users/${i}`)])
  assert.deepEqual(into(), [...a.drainPacked()])
  assert.deepEqual(into().length, 2, 'drained: one closing pair')
  a.drainPacked()
  for (const [x, y] of ids) {
    a.respond(1, x, 200, 'X-RateLimit-Limit\n5\nX-RateLimit-Remaining\n4\nX-RateLimit-Reset-After\n1\nX-RateLimit-Bucket\nu')
    b.respond(1, y, 200, 'X-RateLimit-Limit\n5\nX-RateLimit-Remaining\n4\nX-RateLimit-Reset-After\n1\nX-RateLimit-Bucket\nu')
  }
  // A held output (kind 3) ends a call as it ends a drainPacked list.
  for (;;) {
    const packed = [...a.drainPacked()]
    assert.deepEqual(into(), packed)
    if (packed[packed.length - 2] !== 3) break
    assert.equal(b.takeHeld(), a.takeHeld())
  }
  const c = a.enqueueParts(2, 'GET', '/users/9')
  b.enqueueParts(2, 'GET', '/users/9')
  assert.deepEqual(into(true), [0, c], 'with one: one pair, as pollOutput')
  assert.deepEqual([...a.drainPacked(true)], [0, c])
  assert.equal(b.drainInto(new Float64Array(8)), 2)
  assert.throws(() => b.drainInto(new Float64Array(1)), (e) => e.code === 'invalid_argument')
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
  assert.equal(dl.retryAtNs, undefined)
  const deferred = l.enqueue(4, { method: 'POST', path: '/channels/1/messages', deferAfterNs: 1e8 })
  const [df] = l.drain()
  assert.equal(df.id, deferred)
  assert.equal(df.code, 'deferred')
  assert.equal(df.retryAtNs, 5_000_000_001)
  assert.match(df.message, /defer_after/)
  for (const bad of [-1, NaN, 'soon']) {
    assert.throws(() => l.enqueue(5, { method: 'POST', path: '/channels/1/messages', deferAfterNs: bad }),
      (e) => e.code === 'invalid_argument')
  }
})

test('request costs: whole numbers in an object, refused naming request.costs; names are the core\'s', () => {
  const l = new core.Limiter(JSON.stringify({ profile: 'openai' }))
  const chat = { method: 'POST', path: '/v1/chat/completions' }
  const bad = [
    ['tokens', /request\.costs must be an object/],
    [12, /request\.costs must be an object/],
    [true, /request\.costs must be an object/],
    [[['tokens', 5]], /request\.costs must be an object.*array/],
    [() => 5, /request\.costs must be an object/],
    [{ tokens: -1 }, /request\.costs\.tokens must be a whole number/],
    [{ tokens: 1.5 }, /request\.costs\.tokens must be a whole number/],
    [{ tokens: NaN }, /request\.costs\.tokens must be a whole number/],
    [{ tokens: Infinity }, /request\.costs\.tokens must be a whole number/],
    [{ tokens: 2 ** 53 }, /request\.costs\.tokens must be a whole number/],
    [{ tokens: '1200' }, /request\.costs\.tokens must be a whole number/],
    [{ tokens: 10n }, /request\.costs\.tokens must be a whole number/],
  ]
  for (const [costs, message] of bad) {
    assert.throws(() => l.enqueue(0, { ...chat, costs }), (e) => {
      assert.equal(e.code, 'invalid_argument', `${String(costs)}: ${e.message}`)
      assert.match(e.message, message)
      return true
    })
    assert.throws(() => l.predict(0, { ...chat, costs }), (e) => e.code === 'invalid_argument')
  }
  // The core checks the names: [a-z0-9_], 1 to 32 bytes, not requests, at most 8.
  const nine = Object.fromEntries(Array.from({ length: 9 }, (_, i) => [`d${i}`, 1]))
  for (const costs of [{ requests: 1 }, { Tokens: 1 }, { '': 1 }, { ['x'.repeat(33)]: 1 }, nine]) {
    throwsCode(() => l.enqueue(0, { ...chat, costs }), 'invalid_request')
  }
  assert.equal(l.queued + l.inFlight, 0, 'nothing refused was queued')
  // Absent, undefined, null and empty are no costs; an entry that is undefined or null is left out.
  for (const costs of [undefined, null, {}, { tokens: undefined }, { tokens: null }, { tokens: 0 }, { tokens: 2 ** 53 - 1, points: 3 }]) {
    const id = l.enqueue(1, { ...chat, costs })
    assert.equal(typeof id, 'number')
  }
})

/** An OpenAI-like server with a token budget of `tokens` per minute, its requests 100 per minute. */
function tokenServer(tokens) {
  return new core.SimServer(JSON.stringify({
    profile: 'openai', dialect: 'openai', global: null,
    buckets: { chat: { limit: 100, window_ns: 60e9 } },
    routes: { 'POST /v1/chat/completions': { bucket: 'chat' } },
    tokens: { cost: tokens, limit: 1, window_ns: 60e9 },
  }))
}

test('request costs: the answer\'s usage settles the estimate; hostile usage values are left out', () => {
  const chat = { method: 'POST', path: '/v1/chat/completions' }
  // A costs 900 by its estimate (charged 1800 at the margin's prior, 2), 100 in fact; B (400,
  // charged 750 at the prior after one answer) then fits in what is left (1000 - 100), but
  // not when the answer does not say what A cost.
  const run = (usage) => {
    const server = tokenServer(1000)
    const l = new core.Limiter(JSON.stringify({ profile: 'openai', global_limit: 0 }))
    const a = l.enqueue(0, { ...chat, costs: { tokens: 900 } })
    assert.deepEqual(l.drain(), [{ type: 'send', id: a }, { type: 'idle' }])
    const answer = server.handle(1, chat, 100)
    assert.equal(answer.status, 200)
    assert.deepEqual(answer.body.usage, { total_tokens: 100 })
    assert.deepEqual(JSON.parse(answer.bodyText), { usage: { total_tokens: 100 } })
    const body = usage === 'server' ? answer.body : usage === undefined ? undefined : { usage }
    assert.equal(l.handleResponse(2, a, { status: 200, headers: answer.headers, body }), 'complete')
    l.drain()
    const b = l.enqueue(3, { ...chat, costs: { tokens: 400 } })
    return l.drain()[0].type === 'send' && l.inFlight === 1 && b > a
  }
  assert.equal(run('server'), true, "the sim's body hints settle it")
  assert.equal(run({ total_tokens: 100 }), true)
  assert.equal(run({ input_tokens: 60, output_tokens: 40 }), true, 'Anthropic: input + output')
  assert.equal(run({ prompt_tokens: 60, completion_tokens: 40, total_tokens: 100, details: 5 }), true)
  assert.equal(run(undefined), false, 'without usage the estimate stands')
  // What a server sent is never refused: values that are not finite numbers >= 0 are left out.
  assert.equal(run({ total_tokens: -100, a: NaN, b: Infinity, c: '100', d: true, e: null, f: {} }), false)
  assert.equal(run({ total_tokens: -1, input_tokens: 60, output_tokens: 40 }), true)
})

test('request costs: an estimate above the reported limit fails with insufficient_capacity and its numbers', () => {
  const chat = { method: 'POST', path: '/v1/chat/completions' }
  const server = tokenServer(1000)
  const l = new core.Limiter(JSON.stringify({ profile: 'openai', global_limit: 0 }))
  // No limit known yet: they queue behind the first request, whose answer tells.
  const first = l.enqueue(0, { ...chat, costs: { tokens: 100 } })
  const huge = l.enqueue(0, { ...chat, costs: { tokens: 5000 } })
  const big = l.enqueue(0, { ...chat, costs: { tokens: 3000 } })
  const small = l.enqueue(0, { ...chat, costs: { tokens: 100 } })
  assert.deepEqual(l.drain(), [{ type: 'send', id: first }, { type: 'idle' }])
  const answer = server.handle(1, chat, 100)
  assert.equal(l.handleResponse(2, first, { status: answer.status, headers: answer.headers, body: answer.body }), 'complete')
  const outputs = l.drain()
  const fails = outputs.filter((o) => o.type === 'fail')
  assert.deepEqual(fails.map((f) => [f.id, f.code, f.dimension, f.cost, f.limit]), [
    [huge, 'insufficient_capacity', 'tokens', 5000, 1000],
    [big, 'insufficient_capacity', 'tokens', 3000, 1000],
  ])
  for (const f of fails) {
    assert.match(f.message, /insufficient capacity/)
    assert.equal(f.attempts, undefined)
    assert.equal(f.retryAtNs, undefined)
  }
  assert.deepEqual(outputs.find((o) => o.type === 'send'), { type: 'send', id: small })
  // The limit is known now: decided at enqueue.
  const late = l.enqueue(3, { ...chat, costs: { tokens: 1001 } })
  const [fail] = l.drain()
  assert.deepEqual([fail.type, fail.id, fail.code, fail.dimension, fail.cost, fail.limit], ['fail', late, 'insufficient_capacity', 'tokens', 1001, 1000])
})

test('SimServer: handle(nowNs, request, tokens) charges what the request really costs', () => {
  const chat = { method: 'POST', path: '/v1/chat/completions' }
  const server = tokenServer(500)
  const a = server.handle(0, chat)
  assert.deepEqual(a.body.usage, { total_tokens: 500 }, 'the config\'s cost when it does not say')
  const b = server.handle(1, chat, null)
  assert.deepEqual(b.body.usage, undefined, 'a refused request reports no usage')
  assert.equal(b.status, 429)
  const other = tokenServer(1000)
  assert.deepEqual(other.handle(0, chat, 0).body.usage, { total_tokens: 0 })
  assert.deepEqual(other.handle(1, chat, 999).body.usage, { total_tokens: 999 })
  const remaining = other.handle(2, chat, 1).headers.find(([k]) => k === 'x-ratelimit-remaining-tokens')
  assert.deepEqual(remaining, ['x-ratelimit-remaining-tokens', '0'])
  for (const bad of [-1, 1.5, 'many', NaN, Infinity]) {
    throwsCode(() => other.handle(3, chat, bad), 'invalid_argument')
  }
  // Without a token budget nothing changes.
  assert.deepEqual(new core.SimServer().handle(0, GET, 7).body, { retryAfter: null, global: null })
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

// ------------------------------------------------------------------ server side

const S = 1e9

test('server stores: defaults, options, counts and the answer shapes', () => {
  const gcra = new core.GcraStore(S / 10, 2)
  assert.equal(gcra.maxKeys, 100000)
  assert.equal(new core.GcraStore(S, 1, null).maxKeys, 100000)
  assert.equal(core.GcraStore.perWindow(3, S, { maxKeys: 7 }).maxKeys, 7)
  assert.equal(new core.FixedWindowStore(1, S, { maxKeys: undefined }).maxKeys, 100000)
  const d = gcra.check('a', 0)
  assert.deepEqual({ ...d }, {
    allowed: true, limit: 2, remaining: 1, resetAfterNs: 0, clearAfterNs: S / 10,
    replenishAfterNs: S / 10, windowNs: S / 5, retryAfterS: null,
  })
  assert.deepEqual(JSON.parse(JSON.stringify(d)), { ...d }, 'JSON sees the data only')
  assert.equal(gcra.len, 1)
  assert.equal(gcra.untracked, 0)
  const leaky = new core.LeakyBucketStore(3, S, { dripSize: 1, minIntervalNs: S / 2, maxKeys: 10 })
  assert.equal(leaky.check('u', 0).remaining, 0, 'the minimum interval leaves nothing to send at once')
  assert.equal(leaky.maxKeys, 10)
  const jobs = new core.FixedWindowStore(1, S)
  assert.deepEqual(jobs.schedule('g', 0), { runNow: true, releaseAtNs: 0, waiting: 0 })
  assert.deepEqual(jobs.schedule('g', 0), { runNow: false, releaseAtNs: S, waiting: 1 })
  assert.equal(jobs.release('g', S), true)
  assert.equal(jobs.release('g', S), false)
})

test('server decisions render their headers in the core, from their own fields', () => {
  const blocked = core.GcraStore.perWindow(1, 10 * S)
  blocked.check('k', 0)
  const d = blocked.check('k', 0)
  assert.equal(d.allowed, false)
  assert.deepEqual(d.xRateLimitHeaders(), [
    ['X-RateLimit-Remaining', '0'], ['X-RateLimit-Clear', '10'], ['X-RateLimit-Reset', '10'], ['Retry-After', '10'],
  ])
  assert.deepEqual(d.ietfHeaders('per "key"'), [
    ['RateLimit-Policy', '"per \\"key\\"";q=1;w=10'], ['RateLimit', '"per \\"key\\"";r=0;t=10'], ['Retry-After', '10'],
  ])
  // The methods read the fields: a decision edited (or rebuilt) renders the edited values.
  d.clearAfterNs = 3 * S + 1
  assert.deepEqual(d.xRateLimitHeaders()[1], ['X-RateLimit-Clear', '4'])
  const rebuilt = Object.assign({ ...d, allowed: true, remaining: 1, replenishAfterNs: null }, {
    xRateLimitHeaders: d.xRateLimitHeaders,
    ietfHeaders: d.ietfHeaders,
  })
  assert.deepEqual(rebuilt.ietfHeaders('p'), [['RateLimit-Policy', '"p";q=1;w=10'], ['RateLimit', '"p";r=1']])
  for (const [field, value] of [['remaining', 'x'], ['allowed', 1], ['windowNs', -1], ['limit', 1.5]]) {
    const broken = Object.assign(Object.create(null), { ...d, [field]: value })
    assert.throws(() => d.xRateLimitHeaders.call(broken), (e) => e.code === 'invalid_argument', field)
  }
  assert.throws(() => d.ietfHeaders(5), (e) => e.code === 'invalid_argument')
})

test('server stores: config errors carry the core code and message; wrong JS values invalid_argument', () => {
  const configErrors = [
    [() => new core.GcraStore(0, 1), /interval/],
    [() => new core.GcraStore(S, 0), /burst/],
    [() => core.GcraStore.perWindow(3, 2), /window/],
    [() => new core.GcraStore(S, 1, { maxKeys: 0 }), /max_keys/],
    [() => new core.LeakyBucketStore(3, 0), /drip_rate/],
    [() => core.LeakyBucketStore.fromLegacy({ max: 5 }), /together/],
    [() => core.LeakyBucketStore.fromLegacy({}), /legacy limit/],
    [() => new core.FixedWindowStore(0, S), /quota/],
    [() => new core.LeakyBucketStore(2, S).checkScaled('u', 0, 0), /factor/],
  ]
  for (const [fn, message] of configErrors) {
    throwsCode(fn, 'invalid_config')
    assert.throws(fn, message)
  }
  const gcra = new core.GcraStore(S, 3)
  const wrong = [
    () => gcra.check(5, 0),
    () => gcra.check('k', '0'),
    () => gcra.check('k', -1),
    () => gcra.checkN('k', 0, 1.5),
    () => gcra.checkN('k', 0, -1),
    () => new core.GcraStore(S, 2.5),
    () => new core.GcraStore('1', 2),
    () => new core.GcraStore(S, 2, 'big'),
    () => new core.GcraStore(S, 2, { maxkeys: 5 }),
    () => new core.GcraStore(S, 2, { maxKeys: '5' }),
    () => new core.LeakyBucketStore(3, S, { dripsize: 2 }),
    () => new core.LeakyBucketStore(3, S).checkScaled('u', 0, '0.5'),
    () => core.LeakyBucketStore.fromLegacy(),
    () => core.LeakyBucketStore.fromLegacy({ max: 5, duration: S }),
    () => new core.FixedWindowStore(1, S).schedule(null, 0),
  ]
  wrong.forEach((fn, i) => assert.throws(fn, (e) => {
    assert.equal(e.code, 'invalid_argument', `case ${i}: ${e.message}`)
    return true
  }))
  // One text in both cores: the JS types are checked by js/server_objects.js, the ranges by
  // bindings-js-common.
  const messages = [
    [() => new core.GcraStore('1', 2), 'intervalNs must be a number, got a string'],
    [() => gcra.check(5, 0), 'key must be a string, got a number'],
    [() => new core.GcraStore(S, 2.5), 'burst must be an integer in 0..=4294967295, got 2.5'],
    [() => new core.GcraStore(S, 2, { maxkeys: 5 }), 'unknown option "maxkeys"; expected one of: maxKeys'],
    [() => new core.GcraStore(S, 2, { maxKeys: -1 }), 'maxKeys must be a finite number in 0..=Number.MAX_SAFE_INTEGER, got -1'],
    [() => new core.LeakyBucketStore(3, S).checkScaled('u', 0, '0.5'), 'factor must be a number, got a string'],
  ]
  for (const [fn, message] of messages) assert.throws(fn, { code: 'invalid_argument', message })
})

test('checkN above the burst is insufficient_capacity, counts nothing, and maps to its class', () => {
  const gcra = new core.GcraStore(S, 3)
  let thrown
  assert.throws(() => gcra.checkN('k', 0, 4), (e) => {
    thrown = e
    return e instanceof Error && e.code === 'insufficient_capacity' && e.requested === 4 && e.capacity === 3
  })
  assert.match(thrown.message, /can never be admitted/)
  assert.equal(gcra.len, 0, 'nothing was counted')
  assert.equal(gcra.checkN('k', 0, 3).remaining, 0)
  const typed = ratelane.fromCoreError(thrown)
  assert.ok(typed instanceof ratelane.InsufficientCapacityError && typed instanceof ratelane.RatelaneError)
  assert.deepEqual([typed.code, typed.requested, typed.capacity, typed.cause], ['insufficient_capacity', 4, 3, thrown])
})
