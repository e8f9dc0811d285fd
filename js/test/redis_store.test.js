// js/redis_store.js (the Redis store of shared mode) over a fake node-redis client: the
// script's arguments, pipelining, EVALSHA with EVAL after NOSCRIPT, reservations too old to
// send, Redis errors, flush and close. The real Redis is in bindings-node/test/shared_redis.test.js.
'use strict'
const test = require('node:test')
const assert = require('node:assert/strict')
const crypto = require('node:crypto')
const fs = require('node:fs')
const path = require('node:path')
const { repo, ratelane } = require('./support.cjs')

const { RateLimiter, InvalidConfigError } = ratelane

const source = fs.readFileSync(path.join(repo, 'js', 'redis_store.js'), 'utf8')
// eslint-disable-next-line no-new-func
const createRedisStore = new Function(`${source}\nreturn createRedisStore`)()
const script = fs.readFileSync(path.join(repo, 'redis', 'scripts', 'shared_store.lua'), 'utf8')
const sha = crypto.createHash('sha1').update(script).digest('hex')

const SHARED = { lease_ns: 30e9, pioneer_poll_ns: 50e6, state_ttl_ns: 600e9 }
const RESERVATION = {
  id: 7, identity: 'bot', route: 'POST /channels/:id/messages', major: '1', bucket: null, countsGlobal: true,
  globalLimit: 50, globalWindowNs: 1.1e9, marginNs: 1e8, invalidLimit: 10000, invalidWindowNs: 600e9,
}
const UPDATE = {
  kind: 'bucket', id: 7, identity: 'bot', route: 'POST /channels/:id/messages', major: '1', bucket: 'h',
  unlimited: false, limit: 5, remaining: 4, resetAfterNs: 1e9, windowNs: null,
}

/**
 * A node-redis client in memory: `sendCommand` records each command; the script cache starts
 * empty (NOSCRIPT until an EVAL); `reply(op)` gives the script's reply; `delay` ms per reply.
 */
class FakeClient {
  constructor({ loaded = false, delay = 0, reply } = {}) {
    this.isReady = true
    this.loaded = loaded
    this.delay = delay
    this.reply = reply || ((op) => (op === 'reserve' ? ['granted'] : ['recorded']))
    this.commands = []
    this.answered = 0
    this.destroyed = false
  }
  sendCommand(args) {
    this.commands.push(args)
    const [name] = args
    let result
    if (name === 'SCRIPT') {
      this.loaded = true
      result = () => sha
    } else if (name === 'EVALSHA' && !this.loaded) {
      result = () => { throw Object.assign(new Error('NOSCRIPT No matching script. Please use EVAL.'), { name: 'ErrorReply' }) }
    } else {
      if (name === 'EVAL') this.loaded = true
      const op = args[4]
      if (op === 'batch') {
        // Items after the common part: n (op included), op, its n - 1 arguments.
        const items = []
        for (let i = 10; i < args.length; i += 1 + Number(args[i])) items.push(args.slice(i + 1, i + 1 + Number(args[i])))
        result = () => items.map((item) => this.reply(item[0], item))
      } else {
        result = () => this.reply(op, args)
      }
    }
    return new Promise((resolve, reject) => {
      setTimeout(() => {
        this.answered += 1
        try {
          resolve(result())
        } catch (error) {
          reject(error)
        }
      }, this.delay)
    })
  }
  on() { return this }
  destroy() { this.destroyed = true }
}

function make(deps = {}) {
  return createRedisStore({ ratelane, script, sha, randomId: () => 'proc-1', ...deps })
}

function bound(client, options) {
  const { RedisStore } = make()
  const store = new RedisStore(client, { prefix: '{t}:', ...options })
  store.bind(SHARED)
  return store
}

test('redis store: reservations and updates become the script\'s ARGV, the prefix its only key', async () => {
  const client = new FakeClient({ loaded: true })
  const store = bound(client)
  store.record(UPDATE)
  assert.deepEqual(await store.reserve(RESERVATION), { answer: 'granted' })
  const common = ['', 'proc-1', '30000000000', '50000000', '600000000000']
  // Queued in one turn: one batch call, each item its argument count, its op, its arguments.
  assert.deepEqual(client.commands, [
    ['EVALSHA', sha, '1', '{t}:', 'batch', ...common,
      '12', 'record', 'bucket', '7', 'bot', 'POST /channels/:id/messages', '1', '=h', '0', '5', '4', '1000000000', '',
      '17', 'reserve', '7', 'bot', 'POST /channels/:id/messages', '1', '', '1', '50', '1100000000', '100000000', '10000', '600000000000',
      '1', '', '0', '', ''],
  ])
  // Alone, an operation is its own call.
  assert.deepEqual(await store.reserve(RESERVATION), { answer: 'granted' })
  assert.deepEqual(client.commands[1],
    ['EVALSHA', sha, '1', '{t}:', 'reserve', ...common, '7', 'bot', 'POST /channels/:id/messages', '1', '', '1', '50', '1100000000', '100000000', '10000', '600000000000',
      '1', '', '0', '', ''])
  // A reservation that asks for a lease of the global budget passes how many tokens it wants
  // (a reservation object without globalWant, as above, asks for one).
  assert.deepEqual(await store.reserve({ ...RESERVATION, globalWant: 12 }), { answer: 'granted' })
  assert.deepEqual(client.commands[2].slice(-6, -4), ['600000000000', '12'])
  // After a store outage: the count since, reporting, and the reports' ages joined by ','.
  const { reserveArgs } = make()
  const outage = { ...RESERVATION, globalWant: 3, processesSinceNs: 2e9, reporting: true, unrecordedNs: [5, 9e8], grantedNs: [1e9] }
  assert.deepEqual(reserveArgs(outage).slice(11), ['3', '2000000000', '1', '5,900000000', '1000000000'])
  const { recordArgs, parseAnswer } = make()
  assert.deepEqual(recordArgs({ kind: 'hold', scope: 'global', identity: 'bot', route: 'r', major: '', bucket: null, retryAfterNs: 5 }),
    ['hold', 'global', 'bot', 'r', '', '', '5'])
  assert.deepEqual(recordArgs({ kind: 'release', id: 1, identity: 'b', route: 'r', major: 'm', bucket: 'x', reached: true, windowNs: 9 }),
    ['release', '1', 'b', 'r', 'm', '=x', '1', '9'])
  assert.deepEqual(recordArgs({ kind: 'invalid', id: 3, windowNs: 600 }), ['invalid', '3', '600'])
  assert.throws(() => recordArgs({ kind: 'other' }), TypeError)
  assert.deepEqual(parseAnswer(['denied', 1500, 'bucket']), { answer: 'denied', retryAfterNs: 1500000, scope: 'bucket' })
  // The live-process count the script adds (absent from a script of an earlier version).
  assert.deepEqual(parseAnswer(['granted', 3]), { answer: 'granted', processes: 3 })
  assert.deepEqual(parseAnswer(['denied', 1500, 'bucket', 2]), { answer: 'denied', retryAfterNs: 1500000, scope: 'bucket', processes: 2 })
  // The global tokens leased beyond the request's own.
  assert.deepEqual(parseAnswer(['granted', 3, 2]), { answer: 'granted', processes: 3, leased: 2 })
  // The script's clock (microseconds) when it granted.
  assert.deepEqual(parseAnswer(['granted', 3, 2, 1795812403404294]), { answer: 'granted', processes: 3, leased: 2, storeTimeUs: 1795812403404294 })
  for (const bad of [[], ['granted', -1], ['granted', 1, -1], ['granted', 1, 1, -1], ['granted', 1, 1, 1, 1], ['denied', 1, 'bucket', -1], ['denied', -1, 'bucket'], ['denied', 1.5, 'bucket'], 'granted', null]) {
    assert.throws(() => parseAnswer(bad), /unexpected reply/)
  }
})

test('redis store: what is queued in one turn goes as one script call, in order; NOSCRIPT is answered with EVAL once', async () => {
  const client = new FakeClient({ loaded: false, delay: 5 })
  const store = bound(client)
  store.record(UPDATE)
  const answers = Promise.all([store.reserve(RESERVATION), store.reserve({ ...RESERVATION, id: 8 })])
  await new Promise((r) => setImmediate(r))
  assert.equal(client.commands.length, 1, 'all three in one call')
  assert.deepEqual(await answers, [{ answer: 'granted' }, { answer: 'granted' }])
  // Then the batch again, with EVAL and the script's text.
  assert.deepEqual(client.commands.map((c) => c[0]), ['EVALSHA', 'EVAL'])
  assert.equal(client.commands[1][1], script)
  const ops = (c) => { const o = []; for (let i = 10; i < c.length; i += 1 + Number(c[i])) o.push(c[i + 1]); return o }
  assert.deepEqual(ops(client.commands[1]), ['record', 'reserve', 'reserve'])
  assert.equal(store.dropped, 0)
})

test('redis store: a batch item the script refused fails alone; a malformed batch reply fails them all', async () => {
  let refuse = true
  const client = new FakeClient({
    loaded: true,
    reply: (op, item) => (op === 'reserve' && item[1] === '8' && refuse ? ['error', 'RATELANE_ARG id'] : op === 'reserve' ? ['granted'] : ['recorded']),
  })
  const store = bound(client)
  const answers = await Promise.allSettled([store.reserve(RESERVATION), store.reserve({ ...RESERVATION, id: 8 }), store.reserve({ ...RESERVATION, id: 9 })])
  assert.deepEqual(answers.map((a) => a.status), ['fulfilled', 'rejected', 'fulfilled'])
  assert.match(answers[1].reason.message, /RATELANE_ARG id/)
  refuse = false
  client.reply = () => ['granted']  // one reply for a batch of two: not the script's
  client.sendCommand = ((send) => function (args) { return send.call(this, args).then((r) => (args[4] === 'batch' ? r.slice(1) : r)) })(client.sendCommand)
  const broken = await Promise.allSettled([store.reserve(RESERVATION), store.reserve({ ...RESERVATION, id: 8 })])
  assert.deepEqual(broken.map((a) => a.status), ['rejected', 'rejected'])
  assert.match(broken[0].reason.message, /answered a batch of 2/)
})

test('redis store: without a sha it loads the script once; a denial carries ns and the scope', async () => {
  const client = new FakeClient({ reply: (op) => (op === 'reserve' ? ['denied', 250, 'pioneer'] : ['recorded']) })
  const { RedisStore } = createRedisStore({ ratelane, script })
  const store = new RedisStore(client)
  store.bind(SHARED)
  assert.deepEqual(await store.reserve(RESERVATION), { answer: 'denied', retryAfterNs: 250000, scope: 'pioneer' })
  assert.deepEqual(await store.reserve(RESERVATION), { answer: 'denied', retryAfterNs: 250000, scope: 'pioneer' })
  assert.deepEqual(client.commands.map((c) => c[0]), ['SCRIPT', 'EVALSHA', 'EVALSHA'])
  assert.equal(client.commands[1][3], '{ratelane}:')
  assert.match(client.commands[1][6], /./, 'a client name by default')
})

test('redis store: a reservation queued longer than the timeout is never sent (the driver gave up on it)', async () => {
  const client = new FakeClient({ loaded: true, delay: 60 })
  const store = bound(client, { timeout: 20 })
  const first = store.reserve(RESERVATION)
  await new Promise((r) => setImmediate(r))
  const late = store.reserve({ ...RESERVATION, id: 8 }) // waits behind the first batch for 60 ms
  store.record(UPDATE) // updates are still written
  assert.deepEqual(await first, { answer: 'granted' })
  await assert.rejects(late, /longer than the store timeout/)
  await store.flush()
  assert.deepEqual(client.commands.map((c) => c[4]), ['reserve', 'record'])
  assert.equal(client.commands[0][10], '7')
})

test('redis store: Redis errors reject reservations and drop updates; a client not ready sends nothing', async () => {
  const client = new FakeClient({ loaded: true, reply: () => { throw new Error('READONLY You can\'t write against a read only replica.') } })
  const store = bound(client)
  store.record(UPDATE)
  await assert.rejects(store.reserve(RESERVATION), /READONLY/)
  assert.equal(store.dropped, 1)
  assert.match(String(store.lastError), /READONLY/)

  const bad = bound(new FakeClient({ loaded: true, reply: () => ['what'] }))
  await assert.rejects(bad.reserve(RESERVATION), /unexpected reply/)

  const down = new FakeClient({ loaded: true })
  down.isReady = false
  const offline = bound(down)
  offline.record(UPDATE)
  await assert.rejects(offline.reserve(RESERVATION), /not connected/)
  assert.equal(down.commands.length, 0)
  assert.equal(offline.dropped, 1)
})

test('redis store: close flushes, then refuses; a caller\'s client stays open, its own is destroyed', async () => {
  const client = new FakeClient({ loaded: true, delay: 5 })
  const store = bound(client)
  store.record(UPDATE)
  store.record(UPDATE)
  await store.close()
  assert.deepEqual(client.commands.map((c) => c[4]), ['batch'], 'both updates in one call')
  assert.equal(client.answered, 1, 'close waited for the queued updates')
  await store.close() // idempotent
  store.record(UPDATE)
  assert.equal(store.dropped, 1)
  await assert.rejects(store.reserve(RESERVATION), /closed/)
  assert.equal(client.destroyed, false)

  const own = new FakeClient({ loaded: true })
  own.connect = async () => {}
  const { RedisStore } = make({ connect: (url, { connectTimeout }) => Object.assign(own, { url, connectTimeout }) })
  const owned = new RedisStore('redis://127.0.0.1:1/0', { timeout: 80 })
  assert.equal(own.url, 'redis://127.0.0.1:1/0')
  assert.equal(own.connectTimeout, 80)
  owned.bind(SHARED)
  assert.deepEqual(await owned.reserve(RESERVATION), { answer: 'granted' })
  await owned.close()
  assert.equal(own.destroyed, true)
})

test('redis store: options in ms become the core\'s settings; bad ones are InvalidConfigError', () => {
  const { RedisStore } = make()
  const client = new FakeClient()
  const store = new RedisStore(client, { onUnavailable: 'fail_closed', retryBase: 10, retryMax: 200, lease: 1000, pioneerPoll: 20, stateTtl: 5000, timeout: 30, clientName: 'w1' })
  assert.deepEqual(store.coreSettings(), {
    on_unavailable: 'fail_closed', global_lease: true, retry_base_ns: 10e6, retry_max_ns: 200e6, lease_ns: 1000e6, pioneer_poll_ns: 20e6, state_ttl_ns: 5000e6,
  })
  assert.equal(new RedisStore(client, { globalLease: false }).coreSettings().global_lease, false)
  assert.equal(new RateLimiter({ shared: store }).config.shared.retry_max_ns, 200e6)
  const bad = [
    ['redis://x', {}], // a URL needs the package's connect()
    [{}, {}],
    [client, { timeout: -1 }],
    [client, { onUnavailable: 'open' }],
    [client, { prefix: 5 }],
    [client, { stateTtl: NaN }],
    [client, { unknown: 1 }],
    [client, { globalLease: 1 }],
    [client, 'fail_open'],
  ]
  for (const [arg, options] of bad) {
    assert.throws(() => new RedisStore(arg, options), (e) => e instanceof InvalidConfigError && e.code === 'invalid_config', JSON.stringify(options))
  }
})
