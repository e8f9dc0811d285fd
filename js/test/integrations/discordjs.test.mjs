// `ratelane/discordjs` with the real discord.js and @discordjs/rest (pinned in package.json),
// against the local Discord imitation (the core's simulator behind node:http on 127.0.0.1,
// its windows scaled down): the README's one line, `rest: discordRest(...)`.
//
// * a burst at the global limit over many channels from two REST managers of one token (two
//   shards): discord.js alone takes global 429s, with one limiter under both none, every
//   message sent once;
// * a hidden sub-limit: the 429 goes back to discord.js, whose sub-limit queue holds the
//   renames only; the channel's other edits finish before the held rename (not behind a wait
//   of ratelane's);
// * discord.js's own timeout while a request is queued in the limiter: its retry takes the
//   queued request over (nothing sent twice, nothing lost, the order kept);
// * refusals and errors: ratelane's MaxWaitExceededError; discord.js's DiscordAPIError as
//   without ratelane;
// * two REST managers (two shards, or two processes) sharing the global limit through Redis
//   (RATELANE_REDIS_URL; skipped without it unless RATELANE_REDIS_REQUIRED=1).
// No timing is asserted.
import test from 'node:test'
import assert from 'node:assert/strict'
import { Client, GatewayIntentBits } from 'discord.js'
import { REST, DiscordAPIError } from '@discordjs/rest'
import { ratelane, startServer } from './support.mjs'
import { discordRest } from 'ratelane/discordjs'

const { RateLimiter, MaxWaitExceededError, InvalidArgumentError } = ratelane

/** A Discord of 50 requests per second globally, 5 messages per second per channel. */
const DISCORD = {
  global: { limit: 50, window_ns: 1e9 },
  buckets: { msg: { limit: 5, window_ns: 1e9 }, edit: { limit: 10, window_ns: 2e9 } },
  routes: {
    'POST /channels/:id/messages': { bucket: 'msg' },
    'PATCH /channels/:id': { bucket: 'edit', sub_limit: { limit: 2, window_ns: 1e9 }, sub_limit_class: 'channel_name_topic' },
  },
}

/** A snowflake id (discord.js keys its queues by a major parameter only when it is one). */
const id = (n) => String(100000000000000000n + BigInt(n))

function restFor(server, options = {}) {
  return new REST({ api: `${server.url}/api`, version: '10', ...options }).setToken('bench-token')
}

test('a burst at the global limit from two shards of one token: discord.js alone takes global 429s; with rest: discordRest(limiter) none', async (t) => {
  // Two REST managers in one process (two shards of one bot): each keeps its own global
  // window, so alone the two send twice the limit in the burst's first second, whatever the
  // timing; given one limiter, ratelane holds their sum at the server's limit. (One manager
  // alone meets the limit only as its window and the server's fall: the Scoreboard measures
  // that, BENCHMARKS.md "Issue 47".)
  const burst = (rests) => Promise.allSettled(Array.from({ length: 120 }, (_, i) =>
    rests[i % 2].post(`/channels/${id(1000 + (i % 30))}/messages`, { body: { content: `m${i}` } })))
  const alone = await startServer({ config: DISCORD })
  t.after(() => alone.close())
  const plain = [restFor(alone), restFor(alone)]
  t.after(() => plain.forEach((r) => { r.clearHashSweeper(); r.clearHandlerSweeper() }))
  const done = await burst(plain)
  assert.deepEqual(done.filter((o) => o.status === 'rejected'), [])
  assert.ok((alone.stats.byScope.global || 0) > 0, `discord.js alone: ${JSON.stringify(alone.stats.byScope)}`)

  const server = await startServer({ config: DISCORD })
  t.after(() => server.close())
  const limiter = new RateLimiter({ maxRateLimitRetries: 0, maxErrorRetries: 0, maxWait: 30_000 })
  const clients = [0, 1].map(() => {
    const client = new Client({ intents: [GatewayIntentBits.Guilds], rest: { api: `${server.url}/api`, ...discordRest(limiter) } })
    client.rest.setToken('bench-token')
    t.after(() => client.destroy())
    return client
  })
  const outcomes = await burst(clients.map((c) => c.rest))
  assert.deepEqual(outcomes.filter((o) => o.status === 'rejected').map((o) => String(o.reason)), [])
  assert.deepEqual(server.stats.byScope, {}, 'no 429 of any scope')
  assert.equal(server.stats.arrivals, 120, 'each message sent once')
  await limiter.close()
})

test('a hidden sub-limit: the 429 goes to discord.js, whose sub-limit queue holds only the renames', async (t) => {
  const server = await startServer({ config: DISCORD })
  t.after(() => server.close())
  const options = discordRest()
  const rest = restFor(server, options)
  t.after(() => { rest.clearHashSweeper(); rest.clearHandlerSweeper() })
  const order = []
  const edit = (body, label) => rest.patch(`/channels/${id(77)}`, { body }).then(() => order.push(label))
  await Promise.all([
    edit({ name: 'a' }, 'rename 1'), edit({ name: 'b' }, 'rename 2'), edit({ name: 'c' }, 'rename 3'),
    edit({ nsfw: true }, 'edit 1'), edit({ position: 2 }, 'edit 2'), edit({ nsfw: false }, 'edit 3'),
  ])
  assert.equal(server.stats.byScope.user || 0, 1, `one sub-limit 429: ${JSON.stringify(server.stats.byScope)}`)
  assert.equal(order[order.length - 1], 'rename 3', `the held rename ends last: ${order}`)
  assert.deepEqual(order.slice(0, 5).filter((l) => l.startsWith('edit')), ['edit 1', 'edit 2', 'edit 3'])
  await options.limiter.close()
})

test('discord.js\'s timeout while queued in the limiter: its retry takes the queued request over', async (t) => {
  // A slow global limit (5 per second): the last of 12 messages waits about 2 s in the
  // limiter, well past discord.js's 600 ms timeout, which aborts and retries each call.
  const server = await startServer({ config: { ...DISCORD, global: { limit: 5, window_ns: 1e9 } } })
  t.after(() => server.close())
  const options = discordRest({ globalLimit: 5 })
  let calls = 0
  const attempts = new Map() // init.headers -> calls: discord.js's retry of a request passes the same object
  const makeRequest = (url, init) => {
    calls += 1
    attempts.set(init.headers, (attempts.get(init.headers) || 0) + 1)
    return options.makeRequest(url, init)
  }
  const rest = restFor(server, { ...options, makeRequest, timeout: 600 })
  t.after(() => { rest.clearHashSweeper(); rest.clearHandlerSweeper() })
  const outcomes = await Promise.allSettled(Array.from({ length: 12 }, (_, i) =>
    rest.post(`/channels/${id(2000 + i)}/messages`, { body: { content: `m${i}` } })))
  assert.deepEqual(outcomes.filter((o) => o.status === 'rejected').map((o) => String(o.reason)), [])
  assert.ok(calls > 12, `discord.js timed out and retried (${calls} calls for 12 requests)`)
  // What the takeover relies on (not a documented API of @discordjs/rest): each retry of one
  // request passes the same init.headers object. A version that stops doing so fails here.
  assert.equal(attempts.size, 12, 'one init.headers object per request, over all its attempts')
  assert.equal(server.stats.arrivals, 12, 'nothing sent twice')
  assert.deepEqual(server.stats.byScope, {})
  assert.equal(options.limiter.queued, 0)
  await options.limiter.close()
})

test('refusals are ratelane\'s errors; discord.js\'s own errors are unchanged', async (t) => {
  const server = await startServer({
    config: { ...DISCORD, routes: { ...DISCORD.routes, 'GET /guilds/:id': { bucket: 'msg', status: 404 } } },
  })
  t.after(() => server.close())
  const options = discordRest({ maxWait: 500 })
  const rest = restFor(server, options)
  t.after(() => { rest.clearHashSweeper(); rest.clearHandlerSweeper() })
  await assert.rejects(rest.get(`/guilds/${id(5)}`), (e) => e instanceof DiscordAPIError && e.status === 404)
  // A global limit of 1 per minute: the second message would wait past maxWait.
  const paused = discordRest({ maxWait: 500, globalLimit: 1, globalWindow: 60_000 })
  const slow = restFor(server, paused)
  t.after(() => { slow.clearHashSweeper(); slow.clearHandlerSweeper() })
  await slow.post(`/channels/${id(4)}/messages`, { body: { content: 'first' } })
  await assert.rejects(slow.post(`/channels/${id(5)}/messages`, { body: { content: 'second' } }), (e) => {
    assert.ok(e instanceof MaxWaitExceededError, `${e}`)
    assert.ok(e.predictedWait > 500)
    return true
  })
  await Promise.all([options.limiter.close(), paused.limiter.close()])
})

test('discordRest: a limiter that retries is refused; options are checked', () => {
  assert.throws(() => discordRest(new RateLimiter()), (e) => e instanceof InvalidArgumentError && /must not retry/.test(e.message))
  assert.throws(() => discordRest({ maxRateLimitRetries: 3 }), /maxRateLimitRetries must be 0/)
  assert.throws(() => discordRest({}, { makeReqest: () => {} }), /unknown option "makeReqest"; expected one of: makeRequest, run/)
  const ok = discordRest(new RateLimiter({ maxRateLimitRetries: 0, maxErrorRetries: 0 }))
  assert.equal(ok.globalRequestsPerSecond, Infinity)
  assert.deepEqual(Object.keys(ok).sort(), ['globalRequestsPerSecond', 'makeRequest'])
})

const redisUrl = process.env.RATELANE_REDIS_URL
test('two REST managers (two shards) share the global limit through Redis: no global 429', {
  skip: !redisUrl && process.env.RATELANE_REDIS_REQUIRED !== '1' ? 'RATELANE_REDIS_URL is not set' : false,
}, async (t) => {
  assert.ok(redisUrl, 'RATELANE_REDIS_REQUIRED=1 but RATELANE_REDIS_URL is not set')
  const { RedisStore } = await import('ratelane/redis')
  const server = await startServer({ config: DISCORD })
  t.after(() => server.close())
  const prefix = `{ratelane:discordjs-test:${process.pid}:${Date.now()}}:`
  const shards = [0, 1].map(() => discordRest({ shared: new RedisStore(redisUrl, { prefix }) }))
  const rests = shards.map((options) => restFor(server, options))
  t.after(() => rests.forEach((r) => { r.clearHashSweeper(); r.clearHandlerSweeper() }))
  const outcomes = await Promise.allSettled(Array.from({ length: 120 }, (_, i) =>
    rests[i % 2].post(`/channels/${id(3000 + (i % 30))}/messages`, { body: { content: `m${i}` } })))
  assert.deepEqual(outcomes.filter((o) => o.status === 'rejected').map((o) => String(o.reason)), [])
  assert.equal(server.stats.byScope.global || 0, 0, `no global 429: ${JSON.stringify(server.stats.byScope)}`)
  assert.equal(server.stats.arrivals, 120)
  await Promise.all(shards.map((o) => o.limiter.close()))
})
