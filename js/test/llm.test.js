// The shared LLM request-body API from JavaScript: `readLlmRequest` over the vectors every
// binding replays (tests/vectors/llm_requests.json), through the driver (the packages' main
// entry) and the core module under test (RATELANE_CORE), and the `model` option that keys an
// LLM API's per-model budgets (the object Limiter and RateLimiter.run). Assertions are on
// outcomes and counts, never on elapsed time.
'use strict'
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { repo, core, ratelane } = require('./support.cjs')

const { readLlmRequest, InvalidArgumentError, InvalidRequestError, Limiter, RateLimiter } = ratelane
const CASES = JSON.parse(fs.readFileSync(path.join(repo, 'tests', 'vectors', 'llm_requests.json'), 'utf8')).cases
const CHAT = '/v1/chat/completions'

test('readLlmRequest reads the vectors alike from a string, a Uint8Array and a Buffer', () => {
  assert.ok(CASES.length >= 10)
  for (const c of CASES) {
    for (const body of [c.body, new TextEncoder().encode(c.body), Buffer.from(c.body)]) {
      assert.deepEqual(readLlmRequest(body), c.expected, c._comment)
      assert.deepEqual(core.readLlmRequest(body), c.expected, c._comment)
    }
  }
})

test('readLlmRequest: a body of another type is an InvalidArgumentError', () => {
  for (const body of [undefined, null, 42, { messages: [] }, [1, 2]]) {
    assert.throws(() => readLlmRequest(body), (e) => e instanceof InvalidArgumentError && e.code === 'invalid_argument')
  }
})

function headers(remainingTokens) {
  return [
    ['x-ratelimit-limit-requests', '60'], ['x-ratelimit-remaining-requests', '59'], ['x-ratelimit-reset-requests', '1s'],
    ['x-ratelimit-limit-tokens', '10000'], ['x-ratelimit-remaining-tokens', String(remainingTokens)],
    ['x-ratelimit-reset-tokens', '6s'],
  ]
}

const sends = (outputs) => outputs.filter((o) => o.type === 'send').map((o) => o.id)

test('two models never share a budget (the object Limiter)', () => {
  const limiter = new Limiter(JSON.stringify({ profile: 'openai' }))
  const chat = (model, tokens) => ({ method: 'POST', path: CHAT, model, costs: { tokens } })
  const a1 = limiter.enqueue(0, chat('gpt-a', 3000))
  limiter.enqueue(0, chat('gpt-a', 3000))
  const b1 = limiter.enqueue(0, chat('gpt-b', 3000))
  assert.deepEqual(sends(limiter.drain()), [a1, b1], 'one pioneer per model')
  limiter.handleResponse(100e6, a1, { status: 200, headers: headers(1000), body: { usage: { total_tokens: 3000 } } })
  assert.deepEqual(sends(limiter.drain()), [], 'gpt-a has 1000 tokens left')
  const b2 = limiter.enqueue(150e6, chat('gpt-b', 3000))
  limiter.drain()
  limiter.handleResponse(200e6, b1, { status: 200, headers: headers(7000), body: { usage: { total_tokens: 3000 } } })
  assert.deepEqual(sends(limiter.drain()), [b2])
  assert.throws(() => limiter.enqueue(300e6, chat('', 10)), (e) => e.code === 'invalid_request')
  assert.throws(() => limiter.enqueue(300e6, chat(5, 10)), (e) => e.code === 'invalid_argument')
})

test('RateLimiter.run takes the model option', async () => {
  const limiter = new RateLimiter({ profile: 'openai' })
  const sent = []
  const body = JSON.stringify({ model: 'gpt-4o', max_tokens: 50, messages: [{ role: 'user', content: 'hi' }] })
  const { model, tokens } = readLlmRequest(body)
  assert.equal(model, 'gpt-4o')
  for (const m of [model, 'o3']) {
    const res = await limiter.run('POST', CHAT, () => {
      sent.push(m)
      return { status: 200, headers: Object.fromEntries(headers(9000)) }
    }, { model: m, costs: { tokens } })
    assert.equal(res.status, 200)
  }
  await assert.rejects(limiter.run('POST', CHAT, () => ({ status: 200, headers: {} }), { model: '' }), InvalidRequestError)
  await limiter.close()
  assert.deepEqual(sent, ['gpt-4o', 'o3'])
})
