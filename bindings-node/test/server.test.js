// The package as a user installs it (`require('ratelane')`), driving fetch against a local
// server that imitates Discord's rate limits (discord-server.cjs). Bounded: every test sends a
// fixed number of requests and the server stops by itself. Assertions are outcomes and counts.
'use strict'
const test = require('node:test')
const assert = require('node:assert/strict')
const http = require('node:http')
const ratelane = require('..')
const { startDiscordServer } = require('./discord-server.cjs')

const { RateLimiter, NetworkError, MaybeSentError, ClosedError } = ratelane

const MS = 1e6
const MESSAGES = 'POST /channels/:id/messages'

function discordLike(extra = {}) {
  return {
    buckets: { msg: { limit: 5, window_ns: 300 * MS }, edit: { limit: 10, window_ns: 300 * MS } },
    routes: { [MESSAGES]: { bucket: 'msg' }, 'PATCH /channels/:id': { bucket: 'edit', sub_limit: { limit: 2, window_ns: 400 * MS } } },
    ...extra,
  }
}

function post(server, path, init = {}) {
  return ({ signal }) => fetch(server.url + path, { method: 'POST', body: '{"content":"hi"}', headers: { 'content-type': 'application/json' }, signal, ...init })
}

test('a burst to one channel: every message delivered, no 429', async () => {
  const server = await startDiscordServer({ config: discordLike() })
  const limiter = new RateLimiter()
  try {
    const path = '/api/v10/channels/100000000000000001/messages'
    const responses = await Promise.all(Array.from({ length: 20 }, () => limiter.run('POST', path, post(server, path))))
    assert.deepEqual(responses.map((r) => r.status), Array(20).fill(200))
    const bodies = await Promise.all(responses.map((r) => r.json()))
    assert.equal(new Set(bodies.map((b) => b.id)).size, 20)
    assert.equal(server.count429(), 0)
    assert.equal(server.stats.arrivals, 20)
  } finally {
    await limiter.close()
    await server.close()
  }
})

test('many channels under a small global limit: all delivered, the global limit holds', async () => {
  const server = await startDiscordServer({ config: discordLike({ global: { limit: 10, window_ns: 250 * MS } }) })
  const limiter = new RateLimiter({ globalLimit: 10, globalWindow: 250 })
  try {
    const runs = []
    for (let i = 0; i < 40; i++) {
      const path = `/api/v10/channels/${100000000000000100 + i}/messages`
      runs.push(limiter.run('POST', path, post(server, path)))
    }
    const responses = await Promise.all(runs)
    assert.deepEqual(responses.map((r) => r.status), Array(40).fill(200))
    assert.equal(server.stats.byStatus[429] || 0, 0)
  } finally {
    await limiter.close()
    await server.close()
  }
})

test('a hidden sub-limit: the 429 body is read from a clone, the retry succeeds, the body stays readable', async () => {
  const server = await startDiscordServer({ config: discordLike() })
  const events = []
  const limiter = new RateLimiter({ onRateLimited: (e) => events.push(e) })
  try {
    const path = '/api/v10/channels/100000000000000007'
    const edit = ({ signal }) => fetch(server.url + path, { method: 'PATCH', body: '{"name":"x"}', signal })
    const statuses = []
    for (let i = 0; i < 3; i++) {
      const res = await limiter.run('PATCH', path, edit)
      statuses.push(res.status)
      assert.equal((await res.json()).ok, true)
    }
    assert.deepEqual(statuses, [200, 200, 200])
    assert.equal(server.count429(), 1)
    assert.equal(events.length, 1)
    assert.equal(events[0].scope, 'sub_limit')
    assert.ok(events[0].retryAfter > 0)
  } finally {
    await limiter.close()
    await server.close()
  }
})

test('AbortSignal: a request held by the server is aborted, and the server sees the connection close', async () => {
  const server = await startDiscordServer({ hold: (_, path) => path.endsWith('/slow') })
  const limiter = new RateLimiter()
  try {
    const controller = new AbortController()
    const run = limiter.run('GET', '/api/v10/slow', ({ signal }) => fetch(`${server.url}/api/v10/slow`, { signal }), { signal: controller.signal })
    while (limiter.inFlight === 0) await new Promise((r) => setImmediate(r))
    await new Promise((r) => setTimeout(r, 20))
    controller.abort()
    await assert.rejects(run, (e) => e.name === 'AbortError')
    assert.equal(limiter.inFlight, 0)
    for (let i = 0; i < 100 && server.stats.aborted === 0; i++) await new Promise((r) => setTimeout(r, 10))
    assert.equal(server.stats.aborted, 1)
  } finally {
    await limiter.close()
    await server.close()
  }
})

test('close(): queued messages reject with ClosedError, the one in flight completes', async () => {
  const server = await startDiscordServer({ config: discordLike(), latencyMs: 30 })
  const limiter = new RateLimiter()
  const path = '/api/v10/channels/100000000000000009/messages'
  const runs = Array.from({ length: 4 }, () => limiter.run('POST', path, post(server, path)))
  const all = Promise.allSettled(runs)
  await new Promise((r) => setImmediate(r))
  await limiter.close()
  const settled = await all
  assert.equal(settled[0].status, 'fulfilled')
  assert.equal(settled[0].value.status, 200)
  for (const s of settled.slice(1)) {
    assert.equal(s.status, 'rejected')
    assert.ok(s.reason instanceof ClosedError)
  }
  assert.equal(server.stats.arrivals, 1)
  await server.close()
})

test('connection refused is not_sent: retried with backoff, then NetworkError', async () => {
  const server = await startDiscordServer()
  const url = server.url
  await server.close()
  const limiter = new RateLimiter({ backoffBase: 1, backoffMax: 4, maxErrorRetries: 2 })
  let calls = 0
  await assert.rejects(
    limiter.run('POST', '/api/v10/channels/1/messages', () => { calls++; return fetch(`${url}/api/v10/channels/1/messages`, { method: 'POST' }) }),
    (e) => {
      assert.ok(e instanceof NetworkError, String(e))
      assert.equal(e.attempts, 3)
      return true
    },
  )
  assert.equal(calls, 3)
  await limiter.close()
})

test('a connection dropped after the request arrived is maybe_sent: POST fails, GET is retried', async () => {
  const server = await startDiscordServer({ dropOnce: (_, __, n) => n === 1 || n === 2 })
  const limiter = new RateLimiter({ backoffBase: 1, backoffMax: 4 })
  try {
    const path = '/api/v10/channels/100000000000000011/messages'
    await assert.rejects(limiter.run('POST', path, post(server, path)), (e) => {
      assert.ok(e instanceof MaybeSentError, String(e))
      return true
    })
    const res = await limiter.run('GET', '/api/v10/users/@me', () => fetch(`${server.url}/api/v10/users/@me`))
    assert.equal(res.status, 200)
    assert.equal(server.stats.arrivals, 3)
    assert.equal(server.stats.dropped, 2)
  } finally {
    await limiter.close()
    await server.close()
  }
})

test('node:http responses work too (status and headers, no fetch)', async () => {
  const server = await startDiscordServer({ config: discordLike() })
  const limiter = new RateLimiter()
  try {
    const path = '/api/v10/channels/100000000000000012/messages'
    const get = () => new Promise((resolve, reject) => {
      const req = http.request(server.url + path, { method: 'POST' }, (res) => {
        res.resume()
        res.on('end', () => resolve({ status: res.statusCode, headers: res.headers }))
      })
      req.on('error', reject)
      req.end()
    })
    const statuses = await Promise.all(Array.from({ length: 8 }, () => limiter.run('POST', path, get).then((r) => r.status)))
    assert.deepEqual(statuses, Array(8).fill(200))
    assert.equal(server.count429(), 0)
  } finally {
    await limiter.close()
    await server.close()
  }
})
