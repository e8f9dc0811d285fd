// `ratelane/undici` with the real undici (pinned in package.json) and Node's built-in fetch,
// against the local Discord imitation: the interceptor composed into an Agent, and install()
// on the global dispatcher. Alone a burst takes 429s; through the interceptor none, every
// request completes, and what the caller's handler sees is one answer per request (never a
// 429 the core retried). Refusals, aborts, other origins and long streamed bodies too. No
// timing is asserted.
import test from 'node:test'
import assert from 'node:assert/strict'
import http from 'node:http'
import { Agent, request, fetch as undiciFetch, getGlobalDispatcher } from 'undici'
import { ratelane, startServer } from './support.mjs'
import { interceptor, install } from 'ratelane/undici'

const { RateLimiter, MaxWaitExceededError, InvalidArgumentError } = ratelane

// Messages: 5 per 400 ms per channel, the global limit 20 per 400 ms (the core's simulator).
const DISCORD = {
  global: { limit: 20, window_ns: 400e6 },
  buckets: { msg: { limit: 5, window_ns: 400e6 } },
  routes: { 'POST /channels/:id/messages': { bucket: 'msg' } },
}

/** 24 messages over 3 channels, at once; the statuses the caller got, in order. */
async function burst(server, post) {
  const results = await Promise.allSettled(Array.from({ length: 24 }, (_, i) =>
    post(`${server.url}/api/v10/channels/${100 + (i % 3)}/messages`, JSON.stringify({ content: `m${i}` }))))
  return results.map((r) => (r.status === 'fulfilled' ? r.value : String(r.reason)))
}

const viaRequest = (dispatcher) => async (url, body) => {
  const res = await request(url, { method: 'POST', body, headers: { 'content-type': 'application/json' }, dispatcher })
  await res.body.json()
  return res.statusCode
}

test('undici.request: alone 429s; through agent.compose(interceptor(...)) none, and the caller sees one 200 per request', async (t) => {
  const alone = await startServer({ config: DISCORD })
  t.after(() => alone.close())
  const plain = new Agent()
  t.after(() => plain.close())
  const statuses = await burst(alone, viaRequest(plain))
  assert.ok(statuses.includes(429), `undici alone meets 429s: ${JSON.stringify(alone.stats.byScope)}`)

  const server = await startServer({ config: DISCORD })
  t.after(() => server.close())
  const limiter = new RateLimiter({ globalLimit: 20, globalWindow: 400 })
  const agent = new Agent().compose(interceptor(limiter, { origins: [server.url] }))
  t.after(() => agent.close())
  assert.deepEqual(await burst(server, viaRequest(agent)), Array(24).fill(200))
  assert.deepEqual(server.stats.byScope, {}, 'no 429 of any scope')
  await limiter.close()
})

test('install(): Node\'s built-in fetch goes through the interceptor; uninstall() restores the dispatcher', async (t) => {
  const server = await startServer({ config: DISCORD })
  t.after(() => server.close())
  const before = getGlobalDispatcher()
  const uninstall = install({ globalLimit: 20, globalWindow: 400 }, { origins: server.url })
  const post = async (url, body) => {
    const res = await fetch(url, { method: 'POST', body, headers: { 'content-type': 'application/json' } })
    await res.json()
    return res.status
  }
  try {
    assert.deepEqual(await burst(server, post), Array(24).fill(200))
    assert.deepEqual(server.stats.byScope, {})
    // undici's own fetch too.
    const res = await undiciFetch(`${server.url}/api/v10/channels/7/messages`, { method: 'POST', body: '{}' })
    assert.equal(res.status, 200)
    await res.arrayBuffer()
  } finally {
    uninstall()
  }
  assert.equal(getGlobalDispatcher(), before)
  await uninstall.limiter.close()
})

test('a 429 the core retries never reaches the caller: the hidden sub-limit on renames', async (t) => {
  const server = await startServer({
    config: {
      global: null,
      buckets: { edit: { limit: 10, window_ns: 2e9 } },
      routes: { 'PATCH /channels/:id': { bucket: 'edit', sub_limit: { limit: 2, window_ns: 500e6 }, sub_limit_class: 'channel_name_topic' } },
    },
  })
  t.after(() => server.close())
  const limiter = new RateLimiter()
  const agent = new Agent().compose(interceptor(limiter, { origins: server.url }))
  t.after(() => agent.close())
  const statuses = []
  for (let i = 0; i < 3; i++) {
    const res = await request(`${server.url}/api/v10/channels/9`, {
      method: 'PATCH', dispatcher: agent, body: JSON.stringify({ name: `n${i}` }), headers: { 'content-type': 'application/json' },
    })
    statuses.push(res.statusCode)
    assert.equal((await res.body.json()).ok, true)
  }
  assert.deepEqual(statuses, [200, 200, 200])
  assert.equal(server.stats.byStatus[429], 1, 'the third rename met the sub-limit once, retried by the core')
  await limiter.close()
})

test('refusals: a 429 answer with x-ratelane-code (default) or onError with ratelane\'s error (refusal: throw)', async (t) => {
  const server = await startServer({ config: { global: null, buckets: { msg: { limit: 1, window_ns: 60e9 } }, routes: { 'POST /channels/:id/messages': { bucket: 'msg' } } } })
  t.after(() => server.close())
  const limiter = new RateLimiter({ maxWait: 1000 })
  const agent = new Agent().compose(interceptor(limiter, { origins: server.url }))
  const throwing = new Agent().compose(interceptor(limiter, { origins: server.url, refusal: 'throw' }))
  t.after(() => Promise.all([agent.close(), throwing.close()]))
  const url = `${server.url}/api/v10/channels/5/messages`
  const first = await request(url, { method: 'POST', body: '{}', dispatcher: agent })
  assert.equal(first.statusCode, 200)
  await first.body.dump()
  const refused = await request(url, { method: 'POST', body: '{}', dispatcher: agent })
  assert.equal(refused.statusCode, 429)
  assert.equal(refused.headers['x-ratelane-code'], 'max_wait_exceeded')
  assert.equal((await refused.body.json()).error.code, 'max_wait_exceeded')
  await assert.rejects(request(url, { method: 'POST', body: '{}', dispatcher: throwing }), MaxWaitExceededError)
  assert.equal(server.stats.arrivals, 1)
  await limiter.close()
})

test('an abort while queued cancels the request in the limiter; other origins pass untouched', async (t) => {
  const server = await startServer({ config: { global: null, buckets: { msg: { limit: 1, window_ns: 60e9 } }, routes: { 'POST /channels/:id/messages': { bucket: 'msg' } } } })
  t.after(() => server.close())
  const other = await startServer({ config: DISCORD })
  t.after(() => other.close())
  const limiter = new RateLimiter()
  const agent = new Agent().compose(interceptor(limiter, { origins: [server.url] }))
  t.after(() => agent.close())
  const url = `${server.url}/api/v10/channels/5/messages`
  await (await request(url, { method: 'POST', body: '{}', dispatcher: agent })).body.dump()
  const controller = new AbortController()
  const queued = request(url, { method: 'POST', body: '{}', dispatcher: agent, signal: controller.signal })
  while (limiter.queued === 0) await new Promise((r) => setTimeout(r, 5))
  controller.abort()
  await assert.rejects(queued, (e) => e.name === 'AbortError' || e.code === 'UND_ERR_ABORTED')
  assert.equal(limiter.queued, 0)
  // Another origin: not limited, not even counted.
  const res = await request(`${other.url}/api/v10/channels/1/messages`, { method: 'POST', body: '{}', dispatcher: agent })
  assert.equal(res.statusCode, 200)
  await res.body.dump()
  assert.equal(server.stats.arrivals, 1)
  await limiter.close()
})

test('a long streamed body passes whole, with the caller\'s flow control; options are checked', async (t) => {
  const size = 3 * 1024 * 1024
  const server = http.createServer((req, res) => {
    res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': String(size) })
    const chunk = Buffer.alloc(64 * 1024, 7)
    let sent = 0
    const write = () => {
      while (sent < size) {
        sent += chunk.length
        if (!res.write(chunk)) return res.once('drain', write)
      }
      res.end()
    }
    write()
  })
  await new Promise((r) => server.listen(0, '127.0.0.1', r))
  t.after(() => new Promise((r) => server.close(r)))
  const origin = `http://127.0.0.1:${server.address().port}`
  const limiter = new RateLimiter({ profile: 'ietf' })
  const agent = new Agent().compose(interceptor(limiter, { origins: origin }))
  t.after(() => agent.close())
  const res = await request(`${origin}/blob`, { dispatcher: agent })
  let total = 0
  for await (const chunk of res.body) {
    total += chunk.length
    await new Promise((r) => setImmediate(r)) // a slow reader
  }
  assert.equal(total, size)
  await limiter.close()

  assert.throws(() => interceptor({}, {}), (e) => e instanceof InvalidArgumentError && /origins is required/.test(e.message))
  assert.throws(() => interceptor({}, { origins: '*', orgins: 'x' }), (e) => /unknown option "orgins"; expected one of: origins, refusal, estimate, run/.test(e.message))
  assert.throws(() => interceptor({}, { origins: 5 }), /origins must be a string or an array of strings, got 5/)
})
