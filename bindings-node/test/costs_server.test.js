// Request costs end to end: the package (`require('ratelane')`) driving fetch against a local
// OpenAI-like server (discord-server.cjs with a token budget) whose simulator charges each
// request what its JSON body says it costs, while the client only estimates it. Bounded: a
// fixed number of requests, the server stops by itself. Assertions are outcomes and counts.
'use strict'
const test = require('node:test')
const assert = require('node:assert/strict')
const ratelane = require('..')
const { startDiscordServer } = require('./discord-server.cjs')

const { RateLimiter, InsufficientCapacityError, RateLimitError } = ratelane

const MS = 1e6
const CHAT = '/v1/chat/completions'

/** 10,000 tokens (10 requests' worth of 1000) per 500 ms fixed window; 100 requests per window. */
function openaiLike() {
  return {
    profile: 'openai',
    dialect: 'openai',
    global: null,
    buckets: { chat: { limit: 100, window_ns: 500 * MS } },
    routes: { [`POST ${CHAT}`]: { bucket: 'chat' } },
    tokens: { cost: 1000, limit: 10, window_ns: 500 * MS, kind: 'fixed' },
  }
}

/** The actual cost is the body's `tokens` (what the model would spend on it). */
const costOf = (body) => (body && Number.isInteger(body.tokens) ? body.tokens : undefined)

function chat(server, tokens) {
  return ({ signal }) => fetch(server.url + CHAT, {
    method: 'POST',
    body: JSON.stringify({ model: 'gpt-test', tokens }),
    headers: { 'content-type': 'application/json' },
    signal,
  })
}

/** A seeded PRNG (mulberry32): the same draws every run. */
function prng(seed) {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

test('estimates off by up to ±50 %: every request completes, each admitted once at its actual cost', async (t) => {
  const server = await startDiscordServer({ config: openaiLike(), latencyMs: 5, jitterMs: 5, costOf })
  const limiter = new RateLimiter({ profile: 'openai', globalLimit: 0 })
  try {
    const random = prng(17)
    const jobs = Array.from({ length: 40 }, () => {
      const actual = 200 + Math.floor(random() * 1801)
      return { actual, estimate: Math.round(actual * (0.5 + random())) }
    })
    const responses = await Promise.all(jobs.map(({ actual, estimate }) =>
      limiter.run('POST', CHAT, chat(server, actual), { costs: { tokens: estimate } })))
    assert.deepEqual(responses.map((r) => r.status), Array(40).fill(200))
    const bodies = await Promise.all(responses.map((r) => r.json()))
    assert.deepEqual(bodies.map((b) => b.usage.total_tokens), jobs.map((j) => j.actual), 'each caller reads its own body')
    const admitted = server.stats.tokens.filter((a) => a.status === 200)
    assert.equal(admitted.length, 40)
    assert.equal(admitted.reduce((s, a) => s + a.tokens, 0), jobs.reduce((s, j) => s + j.actual, 0))
    assert.equal(limiter.queued + limiter.inFlight, 0)
    t.diagnostic(`${server.count429()} server 429s for ${server.stats.arrivals} arrivals`)
  } finally {
    await limiter.close()
    await server.close()
  }
})

test('an estimate above the reported token limit rejects with InsufficientCapacityError and is never sent', async () => {
  const server = await startDiscordServer({ config: openaiLike(), costOf })
  const limiter = new RateLimiter({ profile: 'openai', globalLimit: 0 })
  try {
    // Before any answer the limit is unknown: the first request learns it from the server.
    const first = await limiter.run('POST', CHAT, chat(server, 300), { costs: { tokens: 300 } })
    assert.equal(first.status, 200)
    assert.equal((await first.json()).usage.total_tokens, 300)
    const arrivals = server.stats.arrivals
    await assert.rejects(limiter.run('POST', CHAT, chat(server, 12_000), { costs: { tokens: 12_000 } }), (e) => {
      assert.ok(e instanceof InsufficientCapacityError && e instanceof RateLimitError)
      assert.deepEqual([e.code, e.dimension, e.cost, e.limit], ['insufficient_capacity', 'tokens', 12_000, 10_000])
      assert.deepEqual([e.method, e.path], ['POST', CHAT])
      return true
    })
    assert.equal(server.stats.arrivals, arrivals, 'never sent')
    // The whole budget still goes.
    const whole = await limiter.run('POST', CHAT, chat(server, 10_000), { costs: { tokens: 10_000 } })
    assert.equal(whole.status, 200)
  } finally {
    await limiter.close()
    await server.close()
  }
})

test('an oversized first request: the server\'s answer reports the limit, then it fails', async () => {
  const server = await startDiscordServer({ config: openaiLike(), costOf })
  const limiter = new RateLimiter({ profile: 'openai', globalLimit: 0 })
  try {
    await assert.rejects(limiter.run('POST', CHAT, chat(server, 15_000), { costs: { tokens: 15_000 } }), (e) =>
      e instanceof InsufficientCapacityError && e.dimension === 'tokens' && e.cost === 15_000 && e.limit === 10_000)
    assert.equal(server.stats.byStatus[200] || 0, 0)
  } finally {
    await limiter.close()
    await server.close()
  }
})
