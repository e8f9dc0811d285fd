// The provider packs (issue 17 item 2) through the core under test (RATELANE_CORE) and the
// shared driver: every profile by name, readsBody, the body hints the driver extracts, a
// GitHub secondary-limit 403 retried, a throttled Shopify 200 sent again.
'use strict'
const test = require('node:test')
const assert = require('node:assert/strict')
const { core, ratelane } = require('./support.cjs')

const { RateLimiter, InvalidConfigError } = ratelane

const NAMES = ['discord', 'ietf', 'github', 'retry_after_only', 'openai', 'anthropic', 'azure_openai', 'shopify', 'auto']

test('every profile by name, in the core and the driver', () => {
  for (const profile of NAMES) {
    assert.equal(JSON.parse(new core.Limiter(JSON.stringify({ profile })).configJson()).profile, profile)
    assert.equal(new RateLimiter({ profile }).config.profile, profile)
  }
  for (const bad of ['OpenAI', 'open_ai', 'azure', '']) {
    assert.throws(() => new core.Limiter(JSON.stringify({ profile: bad })), (e) => {
      assert.equal(e.code, 'invalid_config')
      for (const name of NAMES) assert.ok(String(e.message).includes(name), `${e.message} lists ${name}`)
      return true
    })
    assert.throws(() => new RateLimiter({ profile: bad }), InvalidConfigError)
  }
})

test('readsBody: the statuses whose body each profile reads', () => {
  const reads = (profile, status) => new core.Limiter(JSON.stringify({ profile })).readsBody(status)
  assert.deepEqual(
    [['discord', 429], ['discord', 403], ['github', 403], ['github', 200], ['shopify', 200], ['auto', 201], ['openai', 200]]
      .map(([p, s]) => reads(p, s)),
    [true, false, true, false, true, true, false])
})

test('handleResponse takes a GraphQL cost and error strings', () => {
  const limiter = new core.Limiter(JSON.stringify({ profile: 'shopify' }))
  const id = limiter.enqueue(0, { method: 'POST', path: '/admin/api/2024-01/graphql.json' })
  limiter.drain()
  const body = {
    cost: { requested: 101, actual: null, maximumAvailable: 1000, currentlyAvailable: 50, restoreRate: 50 },
    errors: ['THROTTLED'],
  }
  assert.equal(limiter.handleResponse(10e6, id, { status: 200, headers: [], body }), 'retry')
  const last = limiter.drain().pop()
  assert.deepEqual(last, { type: 'wait_until', atNs: 10e6 + 19e9 })
  assert.throws(() => limiter.handleResponse(1, id, { status: 200, headers: [], body: { errors: 'THROTTLED' } }), (e) => e.code === 'invalid_argument')
})

/** A transport answering from a list, counting sends. */
function scripted(answers) {
  const sent = []
  return {
    sent,
    send: async () => {
      const answer = answers[Math.min(sent.length, answers.length - 1)]
      sent.push(answer.status)
      return answer
    },
  }
}

test('driver: a GitHub secondary-limit 403 is retried, a plain 403 handed back', async () => {
  const limiter = new RateLimiter({ profile: 'github', minRateLimitWait: 1 })
  const t = scripted([
    { status: 403, headers: { 'x-ratelimit-remaining': '10', 'retry-after': '0' }, body: JSON.stringify({ message: 'You have exceeded a secondary rate limit.' }) },
    { status: 200, headers: { 'x-ratelimit-remaining': '9' } },
  ])
  const res = await limiter.run('POST', '/repos/octo/hello/issues', t.send)
  assert.equal(res.status, 200)
  assert.deepEqual(t.sent, [403, 200])
  const plain = await limiter.run('GET', '/repos/octo/private', async () => ({ status: 403, headers: {}, body: '{"message":"Not allowed"}' }))
  assert.equal(plain.status, 403)
  await limiter.close()
})

test('driver: a throttled Shopify GraphQL 200 is sent again, the body read from every answer', async () => {
  const limiter = new RateLimiter({ profile: 'shopify', minRateLimitWait: 1 })
  const cost = (available, actual) => ({
    cost: { requestedQueryCost: 10, actualQueryCost: actual, throttleStatus: { maximumAvailable: 1000, currentlyAvailable: available, restoreRate: 1000 } },
  })
  const t = scripted([
    { status: 200, headers: {}, body: { errors: [{ message: 'Throttled', extensions: { code: 'THROTTLED' } }], extensions: cost(999.99, null) } },
    { status: 200, headers: { 'content-type': 'application/json' }, body: JSON.stringify({ data: {}, extensions: cost(990, 10) }) },
  ])
  const res = await limiter.run('POST', '/admin/api/2024-01/graphql.json', t.send)
  assert.equal(res.status, 200)
  assert.equal(t.sent.length, 2)
  await limiter.close()
})

test('driver: a body that says it is not JSON (a stream) is left alone', async () => {
  const limiter = new RateLimiter({ profile: 'auto' })
  let cloned = false
  const answer = {
    status: 200,
    headers: { 'content-type': 'text/event-stream', 'x-ratelimit-remaining-requests': '5' },
    clone() { cloned = true; return { text: async () => '' } },
  }
  const res = await limiter.run('POST', '/v1/chat/completions', async () => answer)
  assert.equal(res, answer)
  assert.equal(cloned, false)
  await limiter.close()
})
