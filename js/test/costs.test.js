// Request costs through the Promise driver (js/driver.js) over the core module under test
// (RATELANE_CORE), with in-process fake transports: the `costs` option, the answer's `usage`
// read from a clone of its body (and only for requests with costs), InsufficientCapacityError.
// Assertions are on outcomes and counts, never on elapsed time.
'use strict'
const test = require('node:test')
const assert = require('node:assert/strict')
const { core, native, createRatelane, ratelane } = require('./support.cjs')

const {
  RateLimiter, RatelaneError, RateLimitError, InvalidArgumentError, InvalidRequestError,
  InsufficientCapacityError, FAIL_CLASSES, fromCoreError,
} = ratelane

const CHAT = '/v1/chat/completions'

/** OpenAI's rate-limit headers: 100 requests and `limit` tokens per minute, `remaining` left. */
function openaiHeaders(remaining, limit = 1000) {
  return {
    'content-type': 'application/json',
    'x-ratelimit-limit-requests': '100',
    'x-ratelimit-remaining-requests': '99',
    'x-ratelimit-reset-requests': '60s',
    'x-ratelimit-limit-tokens': String(limit),
    'x-ratelimit-remaining-tokens': String(remaining),
    'x-ratelimit-reset-tokens': '60s',
  }
}

/** A fetch Response of a chat completion that cost `total` tokens, `remaining` left. */
function completion(total, remaining, extra = {}) {
  const body = JSON.stringify({ id: 'chatcmpl-1', choices: [{ message: { content: 'hi' } }], usage: { total_tokens: total }, ...extra })
  return new Response(body, { status: 200, headers: openaiHeaders(remaining) })
}

const tick = () => new Promise((r) => setImmediate(r))

/**
 * After a first request estimated at 900 tokens that was answered with `answer`, whether a
 * second one of 400 (charged 750: the margin's prior after one answer, 1.875) is sent at once:
 * it fits in what is left of the 1000 only when the first answer's usage (100) settled the
 * estimate (the first was charged 1800, the prior of 2 before any answer).
 */
async function secondGoesAtOnce(answer) {
  const limiter = new RateLimiter({ profile: 'openai', globalLimit: 0 })
  const res = await limiter.run('POST', CHAT, () => answer, { costs: { tokens: 900 } })
  assert.equal(res, answer)
  let sent = false
  const controller = new AbortController()
  const second = limiter.run('POST', CHAT, () => { sent = true; return completion(100, 800) }, { costs: { tokens: 400 }, signal: controller.signal })
  for (let i = 0; i < 5 && !sent; i++) await tick()
  if (!sent) controller.abort(new Error('held'))
  await second.catch(() => {})
  await limiter.close()
  return sent
}

test('costs: the 2xx body\'s usage is read from a clone and settles the estimate; the caller\'s body is intact', async () => {
  const answer = completion(100, 900)
  assert.equal(await secondGoesAtOnce(answer), true)
  assert.equal(answer.bodyUsed, false, 'the caller\'s copy is unread')
  const body = await answer.json()
  assert.deepEqual(body.usage, { total_tokens: 100 })
  // Anthropic's input + output, a plain object with the body as text, and as a parsed object.
  const anthropic = { status: 200, headers: openaiHeaders(900), body: JSON.stringify({ usage: { input_tokens: 60, output_tokens: 40 } }) }
  assert.equal(await secondGoesAtOnce(anthropic), true)
  assert.equal(await secondGoesAtOnce({ status: 200, headers: openaiHeaders(900), body: { usage: { total_tokens: 100 } } }), true)
  // Without usage the charge stands: 1800 charged against 1000, 400 does not fit.
  assert.equal(await secondGoesAtOnce(new Response('{"id": "x"}', { status: 200, headers: openaiHeaders(900) })), false)
})

test('costs: usage past 64 KiB of completion is still read; hostile usage values are left out, never thrown', async () => {
  const long = completion(100, 900, { choices: [{ message: { content: 'x'.repeat(200_000) } }] })
  assert.equal(await secondGoesAtOnce(long), true)
  const hostile = { total_tokens: -100, prompt_tokens: '60', completion_tokens: true, cached: null, details: { total_tokens: 100 } }
  const r = new Response(JSON.stringify({ usage: hostile }), { status: 200, headers: openaiHeaders(900) })
  assert.equal(await secondGoesAtOnce(r), false, 'nothing usable: the estimate stands')
  for (const usage of ['100', [100], 100, null]) {
    const odd = new Response(JSON.stringify({ usage }), { status: 200, headers: openaiHeaders(900) })
    assert.equal(await secondGoesAtOnce(odd), false)
  }
  for (const text of ['<html>busy</html>', '{"usage": ', '']) {
    const bad = new Response(text, { status: 200, headers: openaiHeaders(900) })
    assert.equal(await secondGoesAtOnce(bad), false)
  }
  // More than 16 fields: the first 16 numeric ones, in key order (`ratelane::BodyHints`).
  const many = Object.fromEntries(Array.from({ length: 20 }, (_, i) => [`f${i}`, i]))
  const crowded = new Response(JSON.stringify({ usage: { ...many, total_tokens: 100 } }), { status: 200, headers: openaiHeaders(900) })
  assert.equal(await secondGoesAtOnce(crowded), false, 'total_tokens is the 21st field')
})

test('costs: a streamed answer is left alone; a request without costs keeps the fast path and its body unread', async () => {
  let cloned = 0
  const answer = (type) => ({
    status: 200,
    headers: { ...openaiHeaders(900), 'content-type': type },
    clone() { cloned++; return { text: async () => JSON.stringify({ usage: { total_tokens: 100 } }) } },
  })
  const limiter = new RateLimiter({ profile: 'openai', globalLimit: 0 })
  await limiter.run('POST', CHAT, async () => answer('text/event-stream'), { costs: { tokens: 10 } })
  assert.equal(cloned, 0)
  await limiter.run('POST', CHAT, async () => answer('application/json'))
  assert.equal(cloned, 0, 'no costs: a 2xx body is not read')
  await limiter.run('POST', CHAT, async () => answer('application/json'), { costs: { tokens: 10 } })
  assert.equal(cloned, 1)
  await limiter.close()
  // One path: the driver enqueues and answers through the positional surface, costs or not.
  const calls = { enqueue: 0, enqueueParts: 0, handleResponse: 0, respond: 0, respondBody: 0 }
  const counting = Object.assign({}, native, {
    Limiter: class extends native.Limiter {
      enqueue(...a) { calls.enqueue++; return super.enqueue(...a) }
      enqueueParts(...a) { calls.enqueueParts++; return super.enqueueParts(...a) }
      handleResponse(...a) { calls.handleResponse++; return super.handleResponse(...a) }
      respond(...a) { calls.respond++; return super.respond(...a) }
      respondBody(...a) { calls.respondBody++; return super.respondBody(...a) }
    },
  })
  const counted = new (createRatelane(counting).RateLimiter)({ profile: 'openai', globalLimit: 0 })
  await counted.run('POST', CHAT, async () => completion(10, 990))
  assert.deepEqual(calls, { enqueue: 0, enqueueParts: 1, handleResponse: 0, respond: 1, respondBody: 0 })
  await counted.run('POST', CHAT, async () => completion(10, 980), { costs: { tokens: 10 } })
  // With costs the body goes to the core as it came (the core reads its usage).
  assert.deepEqual(calls, { enqueue: 0, enqueueParts: 2, handleResponse: 0, respond: 1, respondBody: 1 })
  await counted.close()
})

test('costs: an estimate above the reported limit rejects with InsufficientCapacityError, never sent', async () => {
  const limiter = new RateLimiter({ profile: 'openai', globalLimit: 0 })
  await limiter.run('POST', CHAT, async () => completion(100, 900), { costs: { tokens: 100 } })
  let sent = 0
  await assert.rejects(limiter.run('POST', CHAT, () => { sent++; return completion(1, 1) }, { costs: { tokens: 5000 } }), (e) => {
    assert.ok(e instanceof InsufficientCapacityError && e instanceof RateLimitError && e instanceof RatelaneError)
    assert.equal(e.code, 'insufficient_capacity')
    assert.equal(e.name, 'InsufficientCapacityError')
    assert.deepEqual([e.dimension, e.cost, e.limit], ['tokens', 5000, 1000])
    assert.deepEqual([e.requested, e.capacity], [5000, 1000])
    assert.deepEqual([e.method, e.path, e.attempts, e.response], ['POST', CHAT, null, null])
    assert.match(e.message, /5000 tokens.*limit of 1000/)
    return true
  })
  assert.equal(sent, 0)
  assert.equal(limiter.queued + limiter.inFlight, 0)
  // The whole limit is not refused: it waits for the window (900 left), here until aborted.
  const controller = new AbortController()
  const whole = limiter.run('POST', CHAT, () => { sent++; return completion(1000, 0) }, { costs: { tokens: 1000 }, signal: controller.signal })
  await tick()
  assert.equal(limiter.queued, 1)
  controller.abort(new Error('enough'))
  await assert.rejects(whole, /enough/)
  assert.equal(sent, 0)
  assert.equal(FAIL_CLASSES.insufficient_capacity, InsufficientCapacityError)
  await limiter.close()
})

test('costs: wrong values reject with InvalidArgumentError naming request.costs, bad names with InvalidRequestError', async () => {
  const limiter = new RateLimiter({ profile: 'openai' })
  let sent = 0
  const send = () => { sent++; return completion(1, 1) }
  for (const costs of ['tokens', 5, [1], { tokens: -1 }, { tokens: 1.5 }, { tokens: '10' }, { tokens: NaN }]) {
    await assert.rejects(limiter.run('POST', CHAT, send, { costs }), (e) =>
      e instanceof InvalidArgumentError && e.code === 'invalid_argument' && /request\.costs/.test(e.message))
    assert.throws(() => limiter.predictWait('POST', CHAT, { costs }), InvalidArgumentError)
  }
  for (const costs of [{ requests: 1 }, { TOKENS: 1 }, { 'tok-ens': 1 }]) {
    await assert.rejects(limiter.run('POST', CHAT, send, { costs }), InvalidRequestError)
  }
  assert.equal(sent, 0)
  assert.equal(limiter.queued, 0)
  // null, undefined and {} are no costs.
  for (const costs of [null, undefined, {}]) {
    assert.equal((await limiter.run('POST', CHAT, send, { costs })).status, 200)
  }
  assert.equal(limiter.predictWait('POST', CHAT, { costs: { tokens: 10 } }), 0)
  await limiter.close()
})

test('InsufficientCapacityError: also the server-side checkN refusal, with both names of its numbers', () => {
  let thrown
  try {
    new core.GcraStore(1e9, 3).checkN('k', 0, 4)
  } catch (e) {
    thrown = e
  }
  const typed = fromCoreError(thrown)
  assert.ok(typed instanceof InsufficientCapacityError && typed instanceof RateLimitError)
  assert.deepEqual([typed.code, typed.requested, typed.capacity, typed.cost, typed.limit, typed.dimension],
    ['insufficient_capacity', 4, 3, 4, 3, null])
  assert.equal(typed.cause, thrown)
  const direct = new InsufficientCapacityError('insufficient_capacity', 'm', { dimension: 'points', cost: 7, limit: 5 })
  assert.deepEqual([direct.dimension, direct.cost, direct.limit, direct.requested, direct.capacity], ['points', 7, 5, 7, 5])
})
