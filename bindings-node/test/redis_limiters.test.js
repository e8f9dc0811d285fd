// `require('ratelane/redis')`: the server-side limiters in Redis (RedisGcra, RedisLeakyBucket,
// RedisFixedWindow) against a real redis-server, and their plumbing against fake clients.
//
// * Every case of every tests/vectors/server_*.json replayed through the scripts (with the
//   scripts' `now_ns` override): decision fields, rendered headers, bookings and releases equal
//   the in-memory stores' answers and the file's `expect`. `store_len` / `untracked` are
//   in-memory counters: instead the key exists in Redis exactly when an in-memory store holds
//   it (as redis/tests/redis_vectors.rs and the Python tests do).
// * One EVALSHA per check with the documented arguments, EVAL only after NOSCRIPT; the scripts
//   are the files of redis/scripts/; error replies, a refused connection and malformed replies
//   become the typed errors with ratelane-redis's codes.
// * Concurrency: several connections and processes on one key with Redis's clock: the admitted
//   count equals the quota (windows of an hour, so nothing replenishes during the test).
// * examples/node/protect_endpoint_redis.js run as a program.
//
// Needs RATELANE_REDIS_URL (scripts/tests.d/20-node.sh starts a throwaway server and sets
// RATELANE_REDIS_REQUIRED=1). Without it the tests that need Redis are reported as skipped,
// or fail when RATELANE_REDIS_REQUIRED=1 or CI is set: they never pass silently.
'use strict'
const test = require('node:test')
const assert = require('node:assert/strict')
const crypto = require('node:crypto')
const fs = require('node:fs')
const net = require('node:net')
const path = require('node:path')
const { execFile } = require('node:child_process')
const { promisify } = require('node:util')
const { createClient, ErrorReply } = require('redis')
const ratelane = require('..')
const redis = require('../redis')

const { RedisGcra, RedisLeakyBucket, RedisFixedWindow } = redis
const { GcraStore, LeakyBucketStore, FixedWindowStore } = ratelane
const { ns, inMemoryStore, decisionForm } = require('../../js/test/server_forms.cjs')

const REPO = path.join(__dirname, '..', '..')
const SCRIPTS = path.join(REPO, 'redis', 'scripts')
const VECTORS = path.join(REPO, 'tests', 'vectors')
const URL = process.env.RATELANE_REDIS_URL
const REQUIRED = process.env.RATELANE_REDIS_REQUIRED === '1' || Boolean(process.env.CI)
const S = 1e9
const MS = 1e6
const HOUR = 3600 * S
/** No key expires in real time during a replay (virtual time runs much faster). */
const MIN_TTL_MS = 60_000

/** A test that needs Redis: skipped (visibly) without RATELANE_REDIS_URL, failed if Redis is required. */
function redisTest(name, fn) {
  if (URL) return test(name, { timeout: 120_000 }, fn)
  if (REQUIRED) {
    return test(name, () => assert.fail('RATELANE_REDIS_URL is not set, but Redis is required (RATELANE_REDIS_REQUIRED=1 or CI)'))
  }
  return test(name, { skip: 'RATELANE_REDIS_URL is not set (scripts/tests.d/20-node.sh sets it)' }, () => {})
}

function uniquePrefix(what) {
  return `ratelane-node-test:${what}:${crypto.randomBytes(6).toString('hex')}:`
}

async function connect() {
  const client = createClient({ url: URL })
  client.on('error', () => {}) // failures reach the command that hit them
  await client.connect()
  return client
}

async function withClient(fn) {
  const client = await connect()
  try {
    return await fn(client)
  } finally {
    await client.close()
  }
}

function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address()
      server.close(() => resolve(port))
    })
  })
}

function sha1(name) {
  return crypto.createHash('sha1').update(fs.readFileSync(path.join(SCRIPTS, `${name}.lua`))).digest('hex')
}

// ------------------------------------------------------------------------------ the scripts

test('the embedded scripts are the files of redis/scripts', () => {
  for (const [name, text] of [['gcra', redis.GCRA_LUA], ['leaky_bucket', redis.LEAKY_BUCKET_LUA], ['fixed_window', redis.FIXED_WINDOW_LUA]]) {
    assert.equal(text, fs.readFileSync(path.join(SCRIPTS, `${name}.lua`), 'utf8'), name)
  }
})

test("the error codes are ratelane-redis's codes, each with its class", () => {
  const source = fs.readFileSync(path.join(REPO, 'redis', 'src', 'error.rs'), 'utf8')
  const listed = /ALL_CODES: &'static \[&'static str\] = &\[(.*?)\];/s.exec(source)
  assert.ok(listed, 'ALL_CODES in redis/src/error.rs')
  assert.deepEqual(redis.REDIS_ERROR_CODES, [...listed[1].matchAll(/"([a-z_]+)"/g)].map((m) => m[1]))
  for (const [code, cls] of Object.entries(redis.REDIS_ERROR_CLASSES)) {
    assert.ok(cls.prototype instanceof redis.RedisLimiterError, code)
    assert.ok(redis.RedisLimiterError.prototype instanceof ratelane.RatelaneError)
    assert.equal(redis[cls.name], cls)
  }
})

// ------------------------------------------------------------------------------ vectors

function buildRedis(algorithm, config, client, prefix) {
  const options = { prefix, minTtlMs: MIN_TTL_MS }
  switch (algorithm) {
    case 'gcra':
      return 'quota' in config
        ? RedisGcra.perWindow(client, config.quota, ns(config, 'window_ms'), options)
        : new RedisGcra(client, ns(config, 'interval_ms'), config.burst, options)
    case 'leaky_bucket':
      if ('legacy' in config) {
        const legacy = config.legacy
        return RedisLeakyBucket.fromLegacy(client, { max: legacy.max, durationNs: ns(legacy, 'duration_ms'), minIntervalNs: ns(legacy, 'min_interval_ms'), ...options })
      }
      return new RedisLeakyBucket(client, config.size, ns(config, 'drip_rate_ms'), { dripSize: config.drip_size, minIntervalNs: ns(config, 'min_interval_ms'), ...options })
    case 'fixed_window':
      return new RedisFixedWindow(client, config.quota, ns(config, 'window_ms'), options)
    default:
      return assert.fail(`unknown algorithm ${algorithm}`)
  }
}

function errorForm(error) {
  if (error instanceof assert.AssertionError || error instanceof redis.RedisLimiterError) throw error // never an expected outcome
  assert.ok(error instanceof Error && typeof error.code === 'string', `a coded error: ${error}`)
  if (error.code === 'insufficient_capacity') return { error: error.code, requested: error.requested, capacity: error.capacity }
  return { error: error.code }
}

function memoryStep(store, step, policy) {
  const now = step.at_ms * MS
  try {
    if (step.op === 'check' && 'n' in step) return decisionForm(store.checkN(step.key, now, step.n), policy)
    if (step.op === 'check' && 'factor' in step) return decisionForm(store.checkScaled(step.key, now, step.factor), policy)
    if (step.op === 'check') return decisionForm(store.check(step.key, now), policy)
    if (step.op === 'schedule') {
      const s = store.schedule(step.key, now)
      return { run_now: s.runNow, release_at_ns: s.releaseAtNs, waiting: s.waiting }
    }
    if (step.op === 'release') return { released: store.release(step.key, now) }
  } catch (error) {
    return errorForm(error)
  }
  return assert.fail(`unknown op ${step.op}`)
}

async function redisStep(limiter, step, policy) {
  const nowNs = step.at_ms * MS
  try {
    if (step.op === 'check' && 'n' in step) return decisionForm(await limiter.checkN(step.key, step.n, { nowNs }), policy)
    if (step.op === 'check' && 'factor' in step) return decisionForm(await limiter.checkScaled(step.key, step.factor, { nowNs }), policy)
    if (step.op === 'check') return decisionForm(await limiter.check(step.key, { nowNs }), policy)
    if (step.op === 'schedule') {
      const s = await limiter.schedule(step.key, { nowNs })
      assert.equal(s.nowNs, BigInt(nowNs), "the script's clock is the one given")
      assert.equal(s.delayNs, Number(s.releaseAtNs - s.nowNs))
      return { run_now: s.runNow, release_at_ns: Number(s.releaseAtNs), waiting: s.waiting }
    }
    if (step.op === 'release') return { released: await limiter.release(step.key, { nowNs }) }
  } catch (error) {
    return errorForm(error)
  }
  return assert.fail(`unknown op ${step.op}`)
}

const vectorFiles = fs.readdirSync(VECTORS).filter((f) => f.startsWith('server_') && f.endsWith('.json')).sort()

test('every server vector file is replayed', () => {
  assert.deepEqual(vectorFiles, ['server_fixed_window.json', 'server_gcra.json', 'server_leaky_bucket.json'])
})

for (const file of vectorFiles) {
  const vectors = JSON.parse(fs.readFileSync(path.join(VECTORS, file), 'utf8'))
  redisTest(`vector ${file} through Redis`, async () => {
    const client = await connect()
    let steps = 0
    try {
      for (const c of vectors.cases) {
        const config = c.config
        if ('expect_error' in c) {
          // Validated by the core before anything is sent, with the in-memory stores' message.
          let inMemory = null
          assert.throws(() => inMemoryStore(ratelane, vectors.algorithm, config), (e) => { inMemory = e; return true })
          assert.throws(() => buildRedis(vectors.algorithm, config, client, 'unused:'), (e) => {
            assert.ok(e instanceof ratelane.InvalidConfigError, `case "${c.name}": ${e}`)
            assert.equal(e.code, c.expect_error)
            assert.equal(e.message, inMemory.message)
            return true
          })
          continue
        }
        const prefix = uniquePrefix(`vectors:${vectors.algorithm}`)
        const limiter = buildRedis(vectors.algorithm, config, client, prefix)
        // Redis has no maxKeys: it is compared with stores that have room for every key, one per
        // key so that `len` says whether that key is held.
        const perKey = new Map()
        let untracked = 0
        for (const [i, step] of c.steps.entries()) {
          const where = `case "${c.name}", step ${i}: ${JSON.stringify(step)}`
          if (!perKey.has(step.key)) perKey.set(step.key, inMemoryStore(ratelane, vectors.algorithm, { ...config, max_keys: 1 << 20 }))
          const store = perKey.get(step.key)
          const inRedis = await redisStep(limiter, step, config.policy)
          assert.deepEqual(inRedis, memoryStep(store, step, config.policy), `Redis vs in-memory, ${where}`)
          const expect = { ...step.expect }
          const grew = expect.untracked > untracked
          untracked = expect.untracked
          delete expect.store_len
          delete expect.untracked
          if (!grew) assert.deepEqual(inRedis, expect, where) // else answered from a state the bounded store could not keep
          const exists = (await client.exists(prefix + step.key)) === 1
          assert.equal(exists, store.len === 1, `the key exists exactly when its state is not empty, ${where}`)
          steps += 1
        }
      }
    } finally {
      await client.close()
    }
    assert.ok(steps > 20, `${steps} steps replayed`)
  })
}

// ------------------------------------------------------------------------------ configuration

/** A client that records script calls and answers them from a list (an Error rejects). */
class FakeClient {
  constructor(replies) {
    this.replies = [...replies]
    this.calls = []
  }

  async _answer(call) {
    this.calls.push(call)
    assert.ok(this.replies.length > 0, `unexpected call ${JSON.stringify(call)}`)
    const reply = this.replies.shift()
    if (reply instanceof Error) throw reply
    return reply
  }

  evalSha(sha, options) {
    return this._answer(['evalSha', sha, options.keys, options.arguments])
  }

  eval(text, options) {
    return this._answer(['eval', text, options.keys, options.arguments])
  }
}

test('configuration is validated by the core, with the in-memory messages', () => {
  const fake = new FakeClient([])
  const p = { prefix: 'p:' }
  const cases = [
    [() => new GcraStore(0, 3), () => new RedisGcra(fake, 0, 3, p)],
    [() => GcraStore.perWindow(0, S), () => RedisGcra.perWindow(fake, 0, S, p)],
    [() => new LeakyBucketStore(0, S), () => new RedisLeakyBucket(fake, 0, S, p)],
    [() => LeakyBucketStore.fromLegacy({ max: 3 }), () => RedisLeakyBucket.fromLegacy(fake, { max: 3, ...p })],
    [() => new FixedWindowStore(3, 0), () => new RedisFixedWindow(fake, 3, 0, p)],
  ]
  for (const [inMemory, inRedis] of cases) {
    let expected = null
    assert.throws(inMemory, (e) => { expected = e; return e.code === 'invalid_config' })
    assert.throws(inRedis, (e) => e instanceof ratelane.InvalidConfigError && e.code === 'invalid_config' && e.message === expected.message)
  }
  assert.deepEqual(fake.calls, [])
})

test('windows the scripts cannot evaluate exactly are refused; options are checked', () => {
  const fake = new FakeClient([])
  const p = { prefix: 'p:' }
  const limit = 2 ** 52
  new RedisGcra(fake, limit, 1, p)
  new RedisFixedWindow(fake, 1, limit, p)
  new RedisLeakyBucket(fake, 1, limit, p)
  for (const make of [
    () => new RedisGcra(fake, limit / 2 + 1, 2, p),
    () => RedisGcra.perWindow(fake, 1, limit + 1, p),
    () => new RedisFixedWindow(fake, 1, limit + 1, p),
    () => new RedisLeakyBucket(fake, 2, limit, p),
    () => new RedisLeakyBucket(fake, 1, S, { minIntervalNs: limit + 1, ...p }),
  ]) {
    assert.throws(make, (e) => e instanceof ratelane.InvalidConfigError && /longer than the Redis scripts evaluate exactly/.test(e.message))
  }
  assert.throws(() => new RedisGcra(fake, S, 1), (e) => e.code === 'invalid_config' && /prefix/.test(e.message))
  assert.throws(() => new RedisGcra(fake, S, 1, { prefix: 7 }), (e) => e.code === 'invalid_config' && /prefix/.test(e.message))
  assert.throws(() => new RedisGcra(null, S, 1, p), (e) => e.code === 'invalid_config' && /client/.test(e.message))
  assert.throws(() => new RedisGcra({}, S, 1, p), (e) => e.code === 'invalid_config' && /client/.test(e.message))
  assert.throws(() => new RedisGcra(fake, S, 1, { ...p, minTtlMs: -1 }), (e) => e.code === 'invalid_config' && /minTtlMs/.test(e.message))
  assert.throws(() => new RedisGcra(fake, S, 1, { ...p, maxKeys: 5 }), (e) => e instanceof ratelane.InvalidArgumentError && /maxKeys/.test(e.message))
  assert.throws(() => new RedisGcra(fake, '1', 1, p), (e) => e.code === 'invalid_argument')
  const gcra = RedisGcra.perWindow(fake, 10, 60 * S, p)
  assert.ok(gcra instanceof RedisGcra)
  assert.deepEqual([gcra.intervalNs, gcra.burst, gcra.windowNs, gcra.prefix, gcra.minTtlMs], [6 * S, 10, 60 * S, 'p:', 0])
  const legacy = RedisLeakyBucket.fromLegacy(fake, { max: 10, durationNs: 60 * S, minIntervalNs: S, ...p })
  assert.ok(legacy instanceof RedisLeakyBucket)
  assert.deepEqual([legacy.size, legacy.dripRateNs, legacy.dripSize, legacy.minIntervalNs], [10, 6 * S, 1, S])
  const window = new RedisFixedWindow(fake, 4, S, { ...p, minTtlMs: 9 })
  assert.deepEqual([window.quota, window.windowNs, window.minTtlMs], [4, S, 9])
  assert.deepEqual(fake.calls, [])
})

// ------------------------------------------------------------------------------ plumbing (fake client)

function decisionReply({ allowed = 1, limit = 3, remaining = 2, reset = 0, clear = 100, replenish = 100, window = 300, now = '1732364823000000005' } = {}) {
  return ['decision', allowed, limit, remaining, reset, clear, replenish, window, now]
}

test('each check is one EVALSHA with the documented arguments', async () => {
  const fake = new FakeClient([
    ...Array.from({ length: 6 }, () => decisionReply()),
    ['scheduled', 0, '1732364823000000305', 1, '1732364823000000005'],
    ['released', 1],
  ])
  const gcra = new RedisGcra(fake, 100, 3, { prefix: 'g:', minTtlMs: 7 })
  const bucket = new RedisLeakyBucket(fake, 10, 1000, { dripSize: 2, minIntervalNs: 50, prefix: 'b:' })
  const window = new RedisFixedWindow(fake, 4, 1000, { prefix: 'w:' })
  const d = await gcra.check('k')
  assert.deepEqual({ ...d }, { allowed: true, limit: 3, remaining: 2, resetAfterNs: 0, clearAfterNs: 100, replenishAfterNs: 100, windowNs: 300, retryAfterS: null })
  assert.equal(Object.getPrototypeOf(d), Object.getPrototypeOf(new GcraStore(100, 3).check('x', 0)), "the in-memory stores' decision class")
  assert.deepEqual(d.xRateLimitHeaders(), [['X-RateLimit-Remaining', '2'], ['X-RateLimit-Clear', '1']])
  await gcra.checkN('k', 0, { nowNs: 42 })
  await bucket.check('k')
  await bucket.checkScaled('k', 0.5, { nowNs: 10n ** 19n })
  await window.check('k')
  await window.check('k', { nowNs: 5 })
  const s = await window.schedule('k')
  assert.deepEqual(s, { runNow: false, releaseAtNs: 1732364823000000305n, waiting: 1, nowNs: 1732364823000000005n, delayNs: 300 })
  assert.equal(await window.release('k'), true)
  assert.deepEqual(fake.calls, [
    ['evalSha', sha1('gcra'), ['g:k'], ['100', '3', '1', '', '7']],
    ['evalSha', sha1('gcra'), ['g:k'], ['100', '3', '0', '42', '7']],
    ['evalSha', sha1('leaky_bucket'), ['b:k'], ['10', '1000', '2', '50', '', '0']],
    ['evalSha', sha1('leaky_bucket'), ['b:k'], ['5', '1000', '2', '50', '10000000000000000000', '0']],
    ['evalSha', sha1('fixed_window'), ['w:k'], ['check', '4', '1000', '', '0']],
    ['evalSha', sha1('fixed_window'), ['w:k'], ['check', '4', '1000', '5', '0']],
    ['evalSha', sha1('fixed_window'), ['w:k'], ['schedule', '4', '1000', '', '0']],
    ['evalSha', sha1('fixed_window'), ['w:k'], ['release', '4', '1000', '', '0']],
  ])
})

test('NOSCRIPT falls back to EVAL with the full text; other errors do not', async () => {
  const noScript = new ErrorReply('NOSCRIPT No matching script. Please use EVAL.')
  const fake = new FakeClient([noScript, decisionReply(), decisionReply()])
  const gcra = new RedisGcra(fake, 100, 3, { prefix: 'g:' })
  await gcra.check('k')
  await gcra.check('k')
  assert.deepEqual(fake.calls.map((c) => c[0]), ['evalSha', 'eval', 'evalSha'])
  assert.equal(fake.calls[1][1], redis.GCRA_LUA)
  const busy = new FakeClient([new ErrorReply('BUSY Redis is busy running a script')])
  await assert.rejects(new RedisGcra(busy, 100, 3, { prefix: 'g:' }).check('k'), (e) => e instanceof redis.RedisServerError && e.code === 'redis_server' && e.cause instanceof ErrorReply)
  assert.equal(busy.calls.length, 1)
})

test('error replies and client failures map to the codes of ratelane-redis', async () => {
  const cases = [
    [new ErrorReply('RATELANE_STATE the key does not hold a GCRA state'), redis.RedisBadStateError, 'redis_bad_state'],
    [new ErrorReply('WRONGTYPE Operation against a key holding the wrong kind of value'), redis.RedisBadStateError, 'redis_bad_state'],
    [new ErrorReply('RATELANE_RANGE the booking is too far ahead'), redis.OutOfRangeError, 'out_of_range'],
    [new ErrorReply('RATELANE_ARG bad interval'), redis.RedisServerError, 'redis_server'],
    [new ErrorReply('OOM command not allowed'), redis.RedisServerError, 'redis_server'],
    [Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:1'), { code: 'ECONNREFUSED' }), redis.RedisConnectionError, 'redis_connection'],
    [new (require('redis').ClientClosedError)(), redis.RedisConnectionError, 'redis_connection'],
    [new (require('redis').SocketTimeoutError)(10), redis.RedisConnectionError, 'redis_connection'],
  ]
  for (const [error, cls, code] of cases) {
    const fake = new FakeClient([error])
    await assert.rejects(new RedisFixedWindow(fake, 1, S, { prefix: 'w:' }).check('k'), (e) => {
      assert.ok(e instanceof cls, `${error.message}: ${e}`)
      assert.equal(e.code, code)
      assert.equal(e.cause, error)
      return true
    })
  }
  // The in-memory store's refusal of the same call: a caller error, not a Redis failure.
  const clock = new ErrorReply('RATELANE_CLOCK the job would be released after 2^64 - 1 ns')
  await assert.rejects(new RedisFixedWindow(new FakeClient([clock]), 1, S, { prefix: 'w:' }).schedule('k'), (e) => {
    assert.ok(e instanceof ratelane.InvalidRequestError && !(e instanceof redis.RedisLimiterError), `${e}`)
    assert.equal(e.code, 'invalid_request')
    assert.equal(e.cause, clock)
    return true
  })
  // Not a Redis failure (a bug): left as it is.
  const bug = new TypeError('boom')
  await assert.rejects(new RedisGcra(new FakeClient([bug]), 1, 1, { prefix: 'p:' }).check('k'), (e) => e === bug)
})

test('a malformed reply is a RedisBadReplyError, never a crash', async () => {
  const malformed = [
    null,
    undefined,
    'decision',
    42,
    {},
    [],
    [1, 2],
    ['nonsense', 1],
    ['decision'],
    decisionReply().slice(0, 8),
    [...decisionReply(), 'extra'],
    decisionReply({ allowed: 2 }),
    decisionReply({ allowed: true }),
    decisionReply({ limit: -1 }),
    decisionReply({ limit: 2 ** 32 }),
    decisionReply({ remaining: 1.5 }),
    decisionReply({ reset: -5 }),
    decisionReply({ clear: '100' }),
    decisionReply({ replenish: -2 }),
    decisionReply({ window: 2 ** 60 }),
    decisionReply({ window: Number.NaN }),
    decisionReply({ now: 17 }),
    decisionReply({ now: '-1' }),
    decisionReply({ now: '1e9' }),
    decisionReply({ now: '' }),
    decisionReply({ now: '99999999999999999999999' }),
    decisionReply({ now: null }),
    [['decision'], 1],
    ['insufficient_capacity', 5],
    ['scheduled', 1, '5', 0, '5'],
    ['released', 1],
  ]
  for (const reply of malformed) {
    const fake = new FakeClient([reply])
    await assert.rejects(new RedisGcra(fake, 100, 3, { prefix: 'g:' }).check('k'), (e) => {
      assert.ok(e instanceof redis.RedisBadReplyError, `${JSON.stringify(reply)}: ${e}`)
      assert.equal(e.code, 'redis_bad_reply')
      return true
    }, JSON.stringify(reply))
  }
  for (const reply of [decisionReply(), ['scheduled', 2, '5', 0, '5'], ['scheduled', 1, 5, 0, '5'], ['scheduled', 1, '5', 0], ['released', 1, 1]]) {
    await assert.rejects(new RedisFixedWindow(new FakeClient([reply]), 1, S, { prefix: 'w:' }).schedule('k'), redis.RedisBadReplyError, JSON.stringify(reply))
  }
  for (const reply of [['released', 2], ['released'], decisionReply()]) {
    await assert.rejects(new RedisFixedWindow(new FakeClient([reply]), 1, S, { prefix: 'w:' }).release('k'), redis.RedisBadReplyError, JSON.stringify(reply))
  }
  // Buffers (a client mapping blob strings to Buffers) and the largest exact integer are fine.
  const buffers = decisionReply({ clear: 2 ** 53 }).map((x) => (typeof x === 'string' ? Buffer.from(x) : x))
  const d = await new RedisGcra(new FakeClient([buffers]), 100, 3, { prefix: 'g:' }).check('k')
  assert.equal(d.clearAfterNs, 2 ** 53)
})

test('insufficient capacity, wrong arguments: nothing is sent', async () => {
  const fake = new FakeClient([['insufficient_capacity', 5, 3]])
  const gcra = new RedisGcra(fake, 100, 3, { prefix: 'g:' })
  await assert.rejects(gcra.checkN('k', 4), (e) => e instanceof ratelane.InsufficientCapacityError && e.requested === 4 && e.capacity === 3)
  assert.equal(fake.calls.length, 0)
  // The script's own answer (a server configured otherwise) is the same error.
  await assert.rejects(gcra.checkN('k', 1), (e) => e instanceof ratelane.InsufficientCapacityError && e.requested === 5 && e.capacity === 3)
  assert.equal(fake.calls.length, 1)
  const bucket = new RedisLeakyBucket(fake, 3, S, { prefix: 'b:' })
  await assert.rejects(bucket.checkScaled('k', 1.5), (e) => e instanceof ratelane.InvalidConfigError)
  await assert.rejects(bucket.checkScaled('k', '0.5'), (e) => e instanceof ratelane.InvalidArgumentError)
  for (const bad of [{ nowNs: -1 }, { nowNs: 1.5e300 }, { nowNs: '5' }, { nowNs: -1n }, { nowNs: 1n << 64n }, { now: 5 }, 'x']) {
    await assert.rejects(gcra.check('k', bad), (e) => e instanceof ratelane.InvalidArgumentError, JSON.stringify(String(bad.nowNs)))
  }
  await assert.rejects(gcra.check(7), (e) => e instanceof ratelane.InvalidArgumentError && /key/.test(e.message))
  // A now past the last instant (2^64 - 1 - windowNs), as the core's GcraStore refuses it.
  for (const nowNs of [(1n << 64n) - 300n, (1n << 64n) - 1n]) {
    await assert.rejects(gcra.check('k', { nowNs }), (e) => e instanceof ratelane.InvalidRequestError && e.code === 'invalid_request', String(nowNs))
  }
  assert.equal(fake.calls.length, 1, 'only the call answered insufficient_capacity by the fake server')
})

// ------------------------------------------------------------------------------ plumbing (real Redis)

redisTest('after SCRIPT FLUSH a check loads the script again (EVAL once), then EVALSHA', () => withClient(async (client) => {
  const gcra = RedisGcra.perWindow(client, 100, HOUR, { prefix: uniquePrefix('noscript') })
  await gcra.check('k')
  await client.scriptFlush()
  assert.deepEqual(await client.scriptExists([sha1('gcra')]), [0])
  const stats = async () => {
    const info = await client.info('commandstats')
    const calls = (name) => Number((new RegExp(`cmdstat_${name}:calls=(\\d+)`).exec(info) || [0, 0])[1])
    return { evalsha: calls('evalsha'), eval: calls('eval') }
  }
  const before = await stats()
  for (let i = 0; i < 3; i++) await gcra.check('k')
  const after = await stats()
  assert.deepEqual({ evalsha: after.evalsha - before.evalsha, eval: after.eval - before.eval }, { evalsha: 3, eval: 1 })
  assert.deepEqual(await client.scriptExists([sha1('gcra')]), [1])
  assert.equal((await gcra.check('k', { nowNs: undefined })).remaining, 100 - 5)
}))

redisTest("with Redis's clock keys expire when empty; schedule answers BigInt times", () => withClient(async (client) => {
  const prefix = uniquePrefix('clock')
  const gcra = new RedisGcra(client, 10 * S, 3, { prefix })
  const d = await gcra.check('k')
  assert.ok(d.allowed && d.remaining === 2 && d.clearAfterNs <= 10 * S)
  const ttl = await client.pTTL(prefix + 'k')
  assert.ok(ttl > 0 && ttl <= 10_000, `ttl ${ttl}`)
  const peek = await gcra.checkN('k', 0)
  assert.ok(peek.allowed && peek.remaining === 2)
  const window = new RedisFixedWindow(client, 1, HOUR, { prefix })
  const first = await window.schedule('job')
  const second = await window.schedule('job')
  assert.ok(first.runNow && !second.runNow)
  assert.equal(typeof first.releaseAtNs, 'bigint')
  assert.equal(first.releaseAtNs, first.nowNs)
  assert.equal(first.delayNs, 0)
  assert.ok(second.nowNs > 1_600_000_000n * 10n ** 9n, 'Unix nanoseconds from Redis TIME')
  assert.ok(second.delayNs > 0 && second.delayNs <= HOUR && BigInt(second.delayNs) === second.releaseAtNs - second.nowNs)
  assert.equal(await window.release('job'), true)
  assert.equal(await window.release('job'), false)
}))

redisTest('RESP3 clients and clients mapping blob strings to Buffers get the same answers', async () => {
  const { RESP_TYPES } = require('redis')
  const resp3 = createClient({ url: URL, RESP: 3 })
  resp3.on('error', () => {})
  await resp3.connect()
  try {
    for (const client of [resp3, resp3.withTypeMapping({ [RESP_TYPES.BLOB_STRING]: Buffer })]) {
      const prefix = uniquePrefix('resp3')
      const gcra = RedisGcra.perWindow(client, 3, 10 * S, { prefix })
      assert.deepEqual({ ...(await gcra.check('k', { nowNs: 0 })) }, { ...GcraStore.perWindow(3, 10 * S).check('k', 0) })
      const window = new RedisFixedWindow(client, 1, HOUR, { prefix })
      await window.schedule('j', { nowNs: 5 })
      assert.deepEqual(await window.schedule('j', { nowNs: 5 }), { runNow: false, releaseAtNs: BigInt(HOUR + 5), waiting: 1, nowNs: 5n, delayNs: HOUR })
      assert.equal(await window.release('j', { nowNs: 6 }), true)
    }
  } finally {
    await resp3.close()
  }
})

redisTest('a key holding something else is left alone (redis_bad_state)', () => withClient(async (client) => {
  const prefix = uniquePrefix('foreign')
  await client.set(prefix + 'text', 'not a state')
  await client.rPush(prefix + 'list', 'x')
  const limiters = [new RedisGcra(client, S, 3, { prefix }), new RedisLeakyBucket(client, 3, S, { prefix }), new RedisFixedWindow(client, 3, S, { prefix })]
  for (const limiter of limiters) {
    for (const key of ['text', 'list']) {
      await assert.rejects(limiter.check(key), (e) => e instanceof redis.RedisBadStateError && e.code === 'redis_bad_state', `${limiter.constructor.name} ${key}`)
    }
  }
  assert.equal(await client.get(prefix + 'text'), 'not a state')
  assert.deepEqual(await client.lRange(prefix + 'list', 0, -1), ['x'])
}))

redisTest('a count out of range is redis_bad_state once, and the key is reset (issue 44)', () => withClient(async (client) => {
  const prefix = uniquePrefix('out-of-range')
  const leaky = new RedisLeakyBucket(client, 2, S, { prefix })
  const fixed = new RedisFixedWindow(client, 2, S, { prefix })
  const cases = [
    [leaky, 'lb', '9007199254740993 1700000000000000000 0 0'],
    [fixed, 'fw', '1700000000000000000 1 99999999999999999999'],
  ]
  for (const [limiter, key, value] of cases) {
    await client.set(prefix + key, value)
    await assert.rejects(limiter.check(key), (e) => e instanceof redis.RedisBadStateError && e.code === 'redis_bad_state', key)
    assert.equal(await client.exists(prefix + key), 0, `${key}: the key was reset`)
    assert.ok((await limiter.check(key)).allowed, `${key}: the next check starts from an empty key`)
  }
}))

test('a reply of a million elements or ten thousand levels is refused at once (issue 44)', async () => {
  let deep = 1
  for (let i = 0; i < 10_000; i++) deep = [deep]
  const replies = [new Array(1_000_000).fill(1), ['decision'].concat(new Array(1_000_000).fill(Buffer.from('x'))), deep, ['released', deep],
    decisionReply({ now: 'x'.repeat(1 << 20) })]
  for (const reply of replies) {
    await assert.rejects(new RedisGcra(new FakeClient([reply]), 100, 3, { prefix: 'g:' }).check('k'), (e) => {
      assert.ok(e instanceof redis.RedisBadReplyError, String(e))
      assert.ok(e.message.length < 400, `${e.message.length} characters`)
      return true
    })
  }
})

redisTest('a booking beyond the scripts range is out_of_range', () => withClient(async (client) => {
  const window = new RedisFixedWindow(client, 1, 2 ** 51, { prefix: uniquePrefix('range') })
  assert.ok((await window.schedule('g', { nowNs: 0 })).runNow)
  assert.ok(!(await window.schedule('g', { nowNs: 0 })).runNow)
  await assert.rejects(window.schedule('g', { nowNs: 0 }), (e) => e instanceof redis.OutOfRangeError && e.code === 'out_of_range')
}))

test('a refused connection is a RedisConnectionError', async () => {
  const client = createClient({ url: `redis://127.0.0.1:${await freePort()}/`, socket: { reconnectStrategy: false } })
  client.on('error', () => {})
  const connecting = client.connect().catch((e) => e)
  const gcra = new RedisGcra(client, S, 3, { prefix: 'p:' })
  await assert.rejects(gcra.check('k'), (e) => {
    assert.ok(e instanceof redis.RedisConnectionError, String(e))
    assert.equal(e.code, 'redis_connection')
    assert.ok(e instanceof ratelane.RatelaneError)
    return true
  })
  assert.equal((await connecting).code, 'ECONNREFUSED')
  // And once the client has given up: closed.
  await assert.rejects(gcra.check('k'), (e) => e instanceof redis.RedisConnectionError)
})

// ------------------------------------------------------------------------------ concurrency

async function redisNow(client) {
  const [seconds, micros] = await client.sendCommand(['TIME'])
  return BigInt(seconds) * 10n ** 9n + BigInt(micros) * 1000n
}

redisTest('several connections on one key: the admitted count equals the quota', async () => {
  const clients = await Promise.all(Array.from({ length: 4 }, connect))
  const perClient = 15
  const quota = 20
  try {
    const hammer = async (make) => {
      const prefix = uniquePrefix('concurrent')
      const limiters = clients.map((c) => make(c, prefix))
      const start = await redisNow(clients[0])
      const answers = await Promise.all(limiters.flatMap((l) => Array.from({ length: perClient }, () => l.check('shared'))))
      const elapsed = Number((await redisNow(clients[0])) - start)
      return { allowed: answers.filter((d) => d.allowed).length, elapsed }
    }
    // Windows of an hour: nothing replenishes during the test, however slow the machine.
    const gcra = await hammer((c, prefix) => RedisGcra.perWindow(c, quota, HOUR, { prefix }))
    assert.ok(gcra.elapsed < HOUR / quota)
    assert.equal(gcra.allowed, quota)
    const bucket = await hammer((c, prefix) => new RedisLeakyBucket(c, quota, HOUR / quota, { prefix }))
    assert.equal(bucket.allowed, quota)
    const window = await hammer((c, prefix) => new RedisFixedWindow(c, quota, HOUR, { prefix }))
    assert.equal(window.allowed, quota)

    // Jobs booked at once: the first window holds the quota, every waiting number once.
    const prefix = uniquePrefix('concurrent-jobs')
    const jobs = clients.map((c) => new RedisFixedWindow(c, 4, HOUR, { prefix }))
    const booked = await Promise.all(jobs.flatMap((j) => Array.from({ length: 5 }, () => j.schedule('group'))))
    assert.equal(booked.filter((s) => s.runNow).length, 4)
    assert.deepEqual(booked.filter((s) => !s.runNow).map((s) => s.waiting).sort((a, b) => a - b), Array.from({ length: 16 }, (_, i) => i + 1))
    const perWindow = new Map()
    for (const s of booked.filter((b) => !b.runNow)) perWindow.set(s.releaseAtNs, (perWindow.get(s.releaseAtNs) || 0) + 1)
    assert.deepEqual([...perWindow.values()], [4, 4, 4, 4])
  } finally {
    await Promise.all(clients.map((c) => c.close()))
  }
})

const WORKER = `
const { createClient } = require('redis')
const { RedisGcra } = require(process.argv[1])
;(async () => {
  const client = createClient({ url: process.argv[2] })
  await client.connect()
  const limiter = RedisGcra.perWindow(client, 25, 3600e9, { prefix: process.argv[3] })
  let allowed = 0
  for (let i = 0; i < 30; i++) allowed += (await limiter.check('shared')).allowed ? 1 : 0
  await client.close()
  console.log(allowed)
})().catch((e) => { console.error(e); process.exit(1) })
`

redisTest('several processes on one key: the admitted count equals the quota', async () => {
  const prefix = uniquePrefix('processes')
  const run = promisify(execFile)
  const env = { ...process.env, NODE_PATH: path.join(__dirname, '..', 'node_modules') }
  const outs = await Promise.all(Array.from({ length: 3 }, () =>
    run(process.execPath, ['-e', WORKER, path.join(__dirname, '..', 'redis.js'), URL, prefix], { env, timeout: 60_000 })))
  const allowed = outs.reduce((sum, { stdout }) => sum + Number(stdout.trim()), 0)
  assert.equal(allowed, 25)
})

// ------------------------------------------------------------------------------ the example

const EXAMPLE = path.join(REPO, 'examples', 'node', 'protect_endpoint_redis.js')

async function getAll(url, n) {
  const answers = []
  for (let i = 0; i < n; i++) {
    const res = await fetch(url)
    answers.push({ status: res.status, headers: [...res.headers], body: await res.json() })
  }
  return answers
}

redisTest('the protect_endpoint_redis example limits per client IP', () => withClient(async (client) => {
  const { makeServer, listen } = require(EXAMPLE)
  // The example's limit, 5 per window, with a window of an hour: nothing replenishes during
  // the test however slow the machine is.
  const server = makeServer(RedisGcra.perWindow(client, 5, HOUR, { prefix: uniquePrefix('example') }))
  let answers
  try {
    answers = await getAll(`http://127.0.0.1:${await listen(server, 0)}/`, 7)
  } finally {
    server.close()
  }
  assert.deepEqual(answers.map((a) => a.status), [200, 200, 200, 200, 200, 429, 429])
  for (const [i, { status, headers, body }] of answers.entries()) {
    const got = Object.fromEntries(headers)
    assert.equal(got['ratelimit-policy'], '"per-client";q=5;w=3600')
    assert.equal(got['x-ratelimit-remaining'], String(Math.max(0, 4 - i)))
    if (status === 200) {
      assert.deepEqual(body, { hello: 'world', remaining: 4 - i })
      assert.equal(got['retry-after'], undefined)
    } else {
      assert.equal(headers.filter(([name]) => name === 'retry-after').length, 1)
      const retry = Number(got['retry-after'])
      assert.ok(retry > 0 && retry <= 720, `one interval of 12 minutes, rounded up: ${retry}`)
      assert.equal(got['x-ratelimit-reset'], got['retry-after'])
      assert.equal(got.ratelimit, `"per-client";r=0;t=${retry}`)
      assert.deepEqual(body, { error: 'rate limited', retryAfterSeconds: retry })
    }
  }
}))

test('the protect_endpoint_redis example fails open without Redis', async () => {
  const { makeServer, listen } = require(EXAMPLE)
  const dead = createClient({ url: `redis://127.0.0.1:${await freePort()}/`, disableOfflineQueue: true, socket: { reconnectStrategy: false } })
  dead.on('error', () => {})
  await dead.connect().catch(() => {})
  const server = makeServer(RedisGcra.perWindow(dead, 5, HOUR, { prefix: 'p:' }))
  const logged = []
  const error = console.error
  console.error = (line) => logged.push(line)
  let answers
  try {
    answers = await getAll(`http://127.0.0.1:${await listen(server, 0)}/`, 1)
  } finally {
    console.error = error
    server.close()
  }
  assert.equal(answers[0].status, 200)
  assert.deepEqual(answers[0].body, { hello: 'world' })
  assert.ok(!answers[0].headers.some(([name]) => name.startsWith('ratelimit')))
  assert.match(logged.join('\n'), /rate limit unavailable, serving anyway: .*\(redis_connection\)/)
})

redisTest('examples/node/protect_endpoint_redis.js runs as a program', async () => {
  const { stdout } = await promisify(execFile)(process.execPath, [EXAMPLE, URL], { timeout: 60_000 })
  const lines = stdout.trim().split('\n')
  assert.equal(lines.length, 8, stdout)
  // A fresh key admits the burst of 5 whatever the timing; what follows depends on the clock.
  for (let i = 0; i < 5; i++) assert.match(lines[i], new RegExp(`^request ${i + 1}: 200 {2}RateLimit: "per-client";r=${4 - i};t=\\d+`))
  for (let i = 5; i < 7; i++) assert.match(lines[i], new RegExp(`^request ${i + 1}: (200|429) {2}RateLimit: "per-client";r=0`))
  assert.match(lines[7], /^\d of 7 requests admitted, counted in Redis under example:[0-9a-f]{8}:per-client:\* \(5 per 10 s per client IP\)$/)
})
