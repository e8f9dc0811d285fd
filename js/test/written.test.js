// The driver reports when fetch wrote a request (`handleWritten`), from undici's
// diagnostics_channel events (the module is passed as the Node entries pass it, support.cjs),
// over real HTTP to a server on 127.0.0.1. Assertions are on which requests were reported,
// never on elapsed time.
'use strict'
const test = require('node:test')
const assert = require('node:assert/strict')
const http = require('node:http')
const { ratelane } = require('./support.cjs')

const { RateLimiter } = ratelane


/** A server answering 200 without rate-limit headers; closed by the returned function. */
async function server() {
  const s = http.createServer((req, res) => {
    req.resume()
    req.on('end', () => res.end('{}'))
  })
  await new Promise((resolve) => s.listen(0, '127.0.0.1', resolve))
  const base = `http://127.0.0.1:${s.address().port}`
  return { base, close: () => new Promise((resolve) => s.close(resolve)) }
}

/** A limiter whose core records every handleWritten call (id, and whether it was in flight). */
function recording(options) {
  const limiter = new RateLimiter(options)
  const core = limiter._core
  const calls = []
  const original = core.handleWritten.bind(core)
  core.handleWritten = (nowNs, id) => {
    calls.push({ id, inFlight: core.inFlight })
    return original(nowNs, id)
  }
  return { limiter, calls }
}

test('fetch called synchronously from send: each attempt is reported once, with its id', async () => {
  const { base, close } = await server()
  const { limiter, calls } = recording({ globalLimit: 50 })
  try {
    const runs = [1, 2, 3].map((channel) => limiter.run('POST', `/channels/${channel}/messages`, ({ signal }) => {
      return fetch(`${base}/channels/${channel}/messages`, { method: 'POST', body: '{}', signal })
    }))
    const responses = await Promise.all(runs)
    for (const r of responses) await r.text()
    assert.equal(calls.length, 3)
    assert.deepEqual(calls.map((c) => c.id).sort(), [1, 2, 3])
    for (const c of calls) assert.ok(c.inFlight >= 1, 'reported while in flight')
  } finally {
    await limiter.close()
    await close()
  }
})

test('a send that creates its request after an await is not reported (the core counts from the send)', async () => {
  const { base, close } = await server()
  const { limiter, calls } = recording({ globalLimit: 50 })
  try {
    const r = await limiter.run('GET', '/users/@me', async () => {
      await new Promise((resolve) => setImmediate(resolve))
      return fetch(`${base}/users/@me`)
    })
    await r.text()
    assert.equal(calls.length, 0)
  } finally {
    await limiter.close()
    await close()
  }
})

test('requests outside the limiter are never reported', async () => {
  const { base, close } = await server()
  const { limiter, calls } = recording({ globalLimit: 50 })
  try {
    const outside = await fetch(`${base}/other`)
    await outside.text()
    const r = await limiter.run('GET', '/users/@me', () => fetch(`${base}/users/@me`))
    await r.text()
    assert.equal(calls.length, 1)
    assert.equal(calls[0].id, 1)
  } finally {
    await limiter.close()
    await close()
  }
})

test('without a diagnosticsChannel (the web and bundler builds) nothing is reported', async () => {
  const { base, close } = await server()
  const { native, createRatelane } = require('./support.cjs')
  const limiter = new (createRatelane(native).RateLimiter)({ globalLimit: 50 })
  let calls = 0
  const original = limiter._core.handleWritten.bind(limiter._core)
  limiter._core.handleWritten = (nowNs, id) => { calls += 1; return original(nowNs, id) }
  try {
    const r = await limiter.run('GET', '/users/@me', () => fetch(`${base}/users/@me`))
    await r.text()
    assert.equal(calls, 0)
  } finally {
    await limiter.close()
    await close()
  }
})
