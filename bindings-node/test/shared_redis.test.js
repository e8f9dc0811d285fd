// Shared mode through Redis (`require('ratelane/redis')`) against a real redis-server:
//
// * the store vectors (tests/vectors/store_*.json) replayed through the JS argument encoding
//   and THE store script: the same answers and live key counts as the core's reference model;
// * several forked Node processes, each with its own RateLimiter, against one local
//   Discord-like server and one Redis: no 429 and every request answered with shared mode; the
//   same workload without it does get 429s (so the test can fail);
// * outages: a redis-server of the test's own stopped mid-run and started again; fail_open
//   completes everything on local limits, fail_closed holds (or fails by deadline) and
//   completes after Redis is back; every request ends exactly once, recovery is automatic;
// * plumbing: options, NOSCRIPT after SCRIPT FLUSH, a caller's client left open, Redis never
//   reachable.
//
// Needs RATELANE_REDIS_URL (scripts/tests.d/20-node.sh starts a throwaway server) and, for the
// outage tests, the redis-server binary. Assertions are on counts and outcomes, never on
// durations; every wait is bounded. Servers listen on 127.0.0.1 only.
'use strict'
const test = require('node:test')
const assert = require('node:assert/strict')
const { fork, spawn, execFileSync } = require('node:child_process')
const crypto = require('node:crypto')
const fs = require('node:fs')
const net = require('node:net')
const os = require('node:os')
const path = require('node:path')
const { createClient } = require('redis')
const { RateLimiter, RateLimitError, InvalidConfigError } = require('..')
const { RedisStore, reserveArgs, recordArgs, parseAnswer, SHARED_STORE_LUA } = require('../redis')
const { startDiscordServer } = require('./discord-server.cjs')

const REDIS_URL = process.env.RATELANE_REDIS_URL
const needsRedis = { skip: REDIS_URL ? false : 'RATELANE_REDIS_URL is not set (scripts/tests.d/20-node.sh sets it)', timeout: 120_000 }
let hasServerBinary = true
try {
  execFileSync('redis-server', ['--version'], { stdio: 'ignore' })
} catch (_) {
  hasServerBinary = false
}
const needsServerBinary = { skip: hasServerBinary ? false : 'redis-server is not installed', timeout: 120_000 }

const MS = 1e6
const VECTORS = path.join(__dirname, '..', '..', 'tests', 'vectors')
const CHANNEL = (i) => `/api/v10/channels/${100000000000000000 + i}/messages`

function uniquePrefix(what) {
  return `{ratelane-node-test:${what}:${crypto.randomUUID().slice(0, 12)}}:`
}

/** Server settings: POST /channels/:id/messages limited to `limit` per `windowMs`. */
function messagesBucket(limit, windowMs, extra = {}) {
  return {
    buckets: { msg: { limit, window_ns: windowMs * MS } },
    routes: { 'POST /channels/:id/messages': { bucket: 'msg' } },
    ...extra,
  }
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

// ------------------------------------------------------------------------------ vectors

const camel = (key) => key.replace(/_([a-z])/g, (_, c) => c.toUpperCase())
const camelObject = (o) => Object.fromEntries(Object.entries(o).map(([k, v]) => [camel(k), v]))

/** Keys of the namespace alive at virtual time `nowNs` (the script's ~expiry index). */
async function liveKeys(client, prefix, nowNs) {
  const index = prefix + '~expiry'
  let count = 0
  const pattern = prefix.replace(/[[\]*?\\]/g, (c) => '\\' + c) + '*'
  for (const name of await client.sendCommand(['KEYS', pattern])) {
    if (name === index) continue
    const score = await client.sendCommand(['ZSCORE', index, name])
    if (score === null || Number(score) > Math.floor(nowNs / 1000)) count += 1
  }
  return count
}

test('store vectors: the JS encoding and the store script give the reference model\'s answers', needsRedis, async () => {
  const files = fs.readdirSync(VECTORS).filter((f) => /^store_.*\.json$/.test(f)).sort()
  assert.ok(files.length >= 5, files.join(', '))
  const client = createClient({ url: REDIS_URL })
  client.on('error', () => {})
  await client.connect()
  try {
    const sha = await client.sendCommand(['SCRIPT', 'LOAD', SHARED_STORE_LUA])
    for (const file of files) {
      const vector = JSON.parse(fs.readFileSync(path.join(VECTORS, file), 'utf8'))
      const config = vector.config
      const prefix = uniquePrefix('vectors')
      for (const [index, step] of vector.steps.entries()) {
        const where = `${file} step ${index}`
        const common = [String(step.at_ns), step.client, String(config.lease_ns), String(config.pioneer_poll_ns), String(config.state_ttl_ns)]
        if (step.op === 'reserve') {
          const args = ['reserve', ...common, ...reserveArgs(camelObject(step.reservation))]
          const answer = parseAnswer(await client.sendCommand(['EVALSHA', sha, '1', prefix, ...args]))
          const expected = step.answer
          assert.equal(answer.answer, expected.answer, where)
          if (answer.answer === 'denied') {
            assert.deepEqual([answer.retryAfterNs, answer.scope], [expected.retry_after_ns, expected.scope], where)
          } else {
            // The script's clock is the replay's: its microseconds, as the store's nanoseconds.
            assert.deepEqual([answer.leased ?? 0, answer.storeTimeUs * 1000], [expected.leased ?? 0, expected.store_time_ns], where)
          }
        } else {
          const update = camelObject(step.update)
          update.kind = update.share
          const reply = await client.sendCommand(['EVALSHA', sha, '1', prefix, 'record', ...common, ...recordArgs(update)])
          assert.deepEqual(reply, ['recorded'], where)
        }
        assert.equal(await liveKeys(client, prefix, step.at_ns), step.keys, `${where}: live keys`)
      }
    }
  } finally {
    await client.close()
  }
})

// ------------------------------------------------------------------------------ processes

/**
 * `processes` forked Node processes each send `perProcess` messages through their own
 * RateLimiter (sharing one Redis namespace if `shared`) to one Discord-like server: message
 * buckets of 5 per 500 ms on 4 channels, and a global limit of 30 per second.
 */
async function runProcesses(shared, processes = 3, perProcess = 40) {
  const globalLimit = 30
  const server = await startDiscordServer({
    config: messagesBucket(5, 500, { global: { limit: globalLimit, window_ns: 1000 * MS } }),
    lifetimeMs: 100_000,
  })
  const prefix = uniquePrefix('processes')
  const startAt = Date.now() + 1500
  const children = []
  try {
    const reports = await Promise.all(Array.from({ length: processes }, () => new Promise((resolve, reject) => {
      const child = fork(path.join(__dirname, 'shared_worker.cjs'),
        [server.url, shared ? REDIS_URL : 'none', prefix, String(perProcess), String(startAt), String(globalLimit)],
        { stdio: ['ignore', 'pipe', 'inherit', 'ipc'] })
      children.push(child)
      let out = ''
      child.stdout.on('data', (chunk) => { out += chunk })
      child.on('error', reject)
      child.on('exit', (code) => {
        if (code !== 0) reject(new Error(`a worker failed (exit ${code})`))
        else resolve(JSON.parse(out.trim().split('\n').pop()))
      })
    })))
    return { server, stats: { ...server.stats }, count429: server.count429(), reports }
  } finally {
    for (const child of children) if (child.exitCode === null) child.kill()
    await server.close()
  }
}

test('3 processes sharing limits through Redis: no 429, every request answered once', needsRedis, async () => {
  const { stats, count429, reports } = await runProcesses(true)
  const results = reports.flatMap((r) => r.results)
  assert.equal(results.length, 120)
  assert.deepEqual(results, Array(120).fill('200'), [...new Set(results)].join(', '))
  // No 429 at the server: no bucket overrun (4 channels x 5 per 500 ms), and the global
  // limit (30 per second, counted at the server on arrival) held.
  assert.equal(count429, 0)
  assert.equal(stats.arrivals, 120) // nothing sent twice, nothing lost
  for (const report of reports) {
    assert.equal(report.dropped, 0)
    assert.ok(!report.observed.includes('storeUnavailable'), report.observed.join(', '))
  }
})

test('the same 3 processes without shared mode do get 429s', needsRedis, async () => {
  const { count429, reports } = await runProcesses(false)
  const results = reports.flatMap((r) => r.results)
  assert.equal(results.length, 120) // every request still ends exactly once
  // Each process alone believes it has the whole budget: together they overrun it.
  assert.ok(count429 > 0, `429s: ${count429}`)
})

// ------------------------------------------------------------------------------ outages

function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer()
    s.on('error', reject)
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address()
      s.close(() => resolve(port))
    })
  })
}

/** One PING over a plain socket: true on +PONG within 200 ms. */
function ping(port) {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1')
    const done = (ok) => { socket.destroy(); resolve(ok) }
    socket.setTimeout(200, () => done(false))
    socket.on('error', () => done(false))
    socket.on('connect', () => socket.write('PING\r\n'))
    socket.on('data', (d) => done(String(d).startsWith('+PONG')))
  })
}

/** A redis-server of the test's own on 127.0.0.1 (so it can be stopped mid-run). */
class PrivateRedis {
  constructor(port) {
    this.port = port
    this.dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ratelane-redis-'))
    this.proc = null
  }
  get url() { return `redis://127.0.0.1:${this.port}/0` }
  async start() {
    this.proc = spawn('redis-server', ['--bind', '127.0.0.1', '--port', String(this.port), '--save', '', '--appendonly', 'no',
      '--dir', this.dir, '--logfile', path.join(this.dir, 'redis.log')], { stdio: 'ignore' })
    for (let i = 0; i < 100; i++) {
      if (await ping(this.port)) return
      await sleep(50)
    }
    throw new Error('the private redis-server did not start')
  }
  async stop() {
    const proc = this.proc
    this.proc = null
    if (proc && proc.exitCode === null) {
      const exited = new Promise((resolve) => proc.once('exit', resolve))
      proc.kill('SIGTERM')
      await exited
    }
  }
  async dispose() {
    await this.stop()
    fs.rmSync(this.dir, { recursive: true, force: true })
  }
}

/**
 * One process sends `requests` messages, one every `every` ms, while its private Redis is
 * stopped at `downAt` and started again at `upAt` (ms from the start). Returns each request's
 * outcome ("200" or a failure code), the server's stats and the observations.
 */
async function outageRun(redis, policy, { requests, every, downAt, upAt, deadlineEvery = 0 }) {
  const server = await startDiscordServer({ config: messagesBucket(5, 500), lifetimeMs: 100_000 })
  const observed = []
  const store = new RedisStore(redis.url, { prefix: uniquePrefix('outage'), timeout: 200, onUnavailable: policy, retryBase: 50, retryMax: 300 })
  const limiter = new RateLimiter({
    maxWait: 30_000,
    shared: store,
    onStoreUnavailable: () => observed.push('storeUnavailable'),
    onStoreRecovered: () => observed.push('storeRecovered'),
  })
  const outage = (async () => {
    await sleep(downAt)
    await redis.stop()
    await sleep(upAt - downAt)
    await redis.start()
  })()
  try {
    const results = await Promise.all(Array.from({ length: requests }, async (_, i) => {
      await sleep(i * every)
      const p = CHANNEL(i % 3)
      const options = deadlineEvery && i % deadlineEvery === 0 ? { deadline: 150 } : {}
      try {
        const response = await limiter.run('POST', p, ({ signal }) => fetch(server.url + p, { method: 'POST', signal }), options)
        await response.arrayBuffer()
        return String(response.status)
      } catch (error) {
        if (error instanceof RateLimitError) return error.code
        throw error
      }
    }))
    await outage
    await limiter.close()
    return { results, stats: { ...server.stats }, count429: server.count429(), observed, store }
  } finally {
    await outage.catch(() => {})
    await server.close()
  }
}

test('outage, fail_open: every request completes on local limits; unavailable, then recovered', needsServerBinary, async () => {
  const redis = new PrivateRedis(await freePort())
  await redis.start()
  try {
    const { results, stats, count429, observed } = await outageRun(redis, 'fail_open', { requests: 60, every: 40, downAt: 600, upAt: 1400 })
    assert.equal(results.length, 60)
    assert.deepEqual(results, Array(60).fill('200'), [...new Set(results)].join(', '))
    assert.equal(stats.arrivals, 60) // each request sent once: nothing lost, nothing doubled
    assert.equal(count429, 0) // one process: its local limits are enough
    assert.ok(observed.includes('storeUnavailable'), observed.join(', '))
    assert.ok(observed.includes('storeRecovered'), observed.join(', ')) // the core probed Redis again after the restart
  } finally {
    await redis.dispose()
  }
})

test('outage, fail_closed: requests wait for Redis or end by their deadline, then complete', needsServerBinary, async () => {
  const redis = new PrivateRedis(await freePort())
  await redis.start()
  try {
    const { results, stats, count429, observed } = await outageRun(redis, 'fail_closed',
      { requests: 60, every: 40, downAt: 600, upAt: 1400, deadlineEvery: 5 })
    assert.equal(results.length, 60) // every request ended exactly once; none hangs
    const failed = results.filter((r) => r !== '200')
    for (const r of failed) assert.ok(r === 'deadline_exceeded' || r === 'max_wait_exceeded', r)
    assert.ok(failed.length > 0, 'some requests with a short deadline met the outage')
    // Only requests with a deadline may fail; the others waited for Redis and completed.
    for (const [i, r] of results.entries()) if (i % 5 !== 0) assert.equal(r, '200', `request ${i}`)
    assert.equal(stats.arrivals, results.length - failed.length) // nothing sent without a grant
    assert.equal(count429, 0)
    assert.ok(observed.includes('storeUnavailable') && observed.includes('storeRecovered'), observed.join(', '))
  } finally {
    await redis.dispose()
  }
})

test('Redis never reachable: fail_open sends on local limits, fail_closed ends by deadline, close() returns', needsServerBinary, async () => {
  const port = await freePort() // nothing listens there
  const server = await startDiscordServer({ config: messagesBucket(5, 500), lifetimeMs: 60_000 })
  try {
    for (const policy of ['fail_open', 'fail_closed']) {
      const store = new RedisStore(`redis://127.0.0.1:${port}/0`, { prefix: uniquePrefix('down'), timeout: 100, onUnavailable: policy })
      let unavailable = 0
      const limiter = new RateLimiter({ shared: store, onStoreUnavailable: () => { unavailable += 1 } })
      const outcomes = await Promise.all(Array.from({ length: 6 }, async (_, i) => {
        try {
          const r = await limiter.run('POST', CHANNEL(i % 2), ({ signal }) => fetch(server.url + CHANNEL(i % 2), { method: 'POST', signal }),
            policy === 'fail_closed' ? { deadline: 400 } : {})
          await r.arrayBuffer()
          return String(r.status)
        } catch (error) {
          if (error instanceof RateLimitError) return error.code
          throw error
        }
      }))
      await limiter.close()
      assert.ok(unavailable >= 1, policy)
      if (policy === 'fail_open') assert.deepEqual(outcomes, Array(6).fill('200'))
      else assert.deepEqual(outcomes, Array(6).fill('deadline_exceeded'))
    }
    assert.equal(server.stats.arrivals, 6) // fail_closed sent nothing
  } finally {
    await server.close()
  }
})

// ------------------------------------------------------------------------------ plumbing

test('RedisStore options: camelCase in ms, checked with InvalidConfigError', () => {
  const client = createClient({ url: 'redis://127.0.0.1:1' }) // never connected
  const bad = [
    [42, {}],
    [{}, {}],
    [client, { timeout: 0 }],
    [client, { timeout: Infinity }],
    [client, { onUnavailable: 'fail_maybe' }],
    [client, { prefix: '' }],
    [client, { retryBase: -1 }],
    [client, { lease: '30s' }],
    [client, { clientName: '' }],
    [client, { retry_base: 100 }],
    [client, { globalLease: 'yes' }],
  ]
  for (const [arg, options] of bad) {
    assert.throws(() => new RedisStore(arg, options), (e) => {
      assert.ok(e instanceof InvalidConfigError, `${JSON.stringify(options)}: ${e}`)
      assert.equal(e.code, 'invalid_config')
      return true
    })
  }
  const store = new RedisStore(client, { onUnavailable: 'fail_closed', timeout: 50, lease: 20_000, pioneerPoll: 40, stateTtl: 60_000, retryBase: 10, retryMax: 2000 })
  assert.deepEqual(store.coreSettings(), {
    on_unavailable: 'fail_closed', global_lease: true, lease_ns: 20_000 * MS, pioneer_poll_ns: 40 * MS, state_ttl_ns: 60_000 * MS, retry_base_ns: 10 * MS, retry_max_ns: 2000 * MS,
  })
  assert.equal(store.timeout, 50)
  assert.equal(store.prefix, '{ratelane}:')
  const limiter = new RateLimiter({ shared: store })
  assert.equal(limiter.config.shared.lease_ns, 20_000 * MS)
})

test('a caller\'s client: NOSCRIPT after SCRIPT FLUSH is handled, and close() leaves the client open', needsRedis, async () => {
  const client = createClient({ url: REDIS_URL })
  client.on('error', () => {})
  await client.connect()
  const server = await startDiscordServer({ config: messagesBucket(5, 500), lifetimeMs: 60_000 })
  try {
    const prefix = uniquePrefix('noscript')
    const store = new RedisStore(client, { prefix, timeout: 1000 })
    let unavailable = 0
    const limiter = new RateLimiter({ shared: store, onStoreUnavailable: () => { unavailable += 1 } })
    const send = (i) => limiter.run('POST', CHANNEL(i), ({ signal }) => fetch(server.url + CHANNEL(i), { method: 'POST', signal }))
      .then(async (r) => { await r.arrayBuffer(); return r.status })
    assert.deepEqual(await Promise.all([0, 1, 2].map(send)), [200, 200, 200])
    await client.sendCommand(['SCRIPT', 'FLUSH'])
    assert.deepEqual(await Promise.all([3, 4, 5].map(send)), [200, 200, 200])
    await limiter.close()
    assert.equal(unavailable, 0)
    assert.equal(store.dropped, 0)
    // The store wrote its state under the prefix, and the caller's client is still usable.
    assert.ok((await client.sendCommand(['KEYS', prefix.replace(/[[\]*?\\]/g, (c) => '\\' + c) + '*'])).length > 0)
    assert.equal(await client.sendCommand(['PING']), 'PONG')
  } finally {
    await server.close()
    await client.close()
  }
})

test('a store made from a URL does not keep the process alive once its requests are done', needsRedis, () => {
  // Without close(): the connection is unref'd, so the process exits by itself.
  const program = `
    const { RateLimiter } = require(${JSON.stringify(path.join(__dirname, '..'))})
    const { RedisStore } = require(${JSON.stringify(path.join(__dirname, '..', 'redis'))})
    const store = new RedisStore(process.env.RATELANE_REDIS_URL, { prefix: ${JSON.stringify(uniquePrefix('exit'))}, timeout: 1000 })
    let unavailable = 0
    const limiter = new RateLimiter({ shared: store, onStoreUnavailable: () => { unavailable += 1 } })
    limiter.run('POST', '/channels/1/messages', () => ({ status: 200, headers: {} }))
      .then((r) => console.log('done', r.status, 'unavailable', unavailable))`
  const out = execFileSync(process.execPath, ['-e', program], { encoding: 'utf8', timeout: 30_000, env: process.env })
  assert.equal(out.trim(), 'done 200 unavailable 0')
})
