// `require('ratelane/redis')`: the server-side limiters evaluated atomically in Redis, so that
// every process or machine serving an endpoint enforces one shared limit.
//
//   const { createClient } = require('redis')                // npm `redis` (node-redis) 5 or 6
//   const { RedisGcra } = require('ratelane/redis')
//   const client = await createClient({ url: 'redis://127.0.0.1:6379/0' }).connect()
//   const perUser = RedisGcra.perWindow(client, 10, 60e9, { prefix: 'api:per-user:' })
//   const decision = await perUser.check(userId)              // one script call, one round trip
//   const headers = decision.ietfHeaders('per-user')          // rendered by the core
//   if (!decision.allowed) { /* 429 with headers (Retry-After included) */ }
//
// Each check is one `EVALSHA` of one of the Lua scripts of `redis/scripts/` (`EVAL` once when
// Redis answers `NOSCRIPT`): the same files the Rust crate `ratelane-redis` and the Python
// package load, embedded in the native addon at build time. The script reads Redis's own clock
// (`TIME`), so the processes' clocks do not matter, and answers with the same decision object
// as the in-memory `GcraStore`, `LeakyBucketStore` and `FixedWindowStore` (`js/CONTRACT.md`).
// The native half (`ServerLimit` in `src/server.rs`, the core's `Limit`, made through the
// shared js/server_objects.js, which checks the arguments' types) validates the configuration,
// builds the scripts' arguments and reads their replies; this file does the I/O and maps
// failures.
//
// When a check cannot decide it rejects with a `RedisLimiterError` whose `code` is one of
// `redis_connection`, `redis_server`, `redis_bad_state`, `out_of_range`, `redis_bad_reply`
// (the codes of `ratelane-redis`). Nothing retries inside and nothing falls back: admit (fail
// open) or refuse (fail closed) as suits the endpoint.
'use strict'
const crypto = require('node:crypto')
const ratelane = require('./index.js') // checks that the package was built
const native = require('./ratelane.node')
const { serverObjects } = require('./core.cjs')

const { RatelaneError, fromCoreError, InvalidConfigError, InvalidArgumentError, InvalidRequestError } = ratelane

// ------------------------------------------------------------------------------ errors

/**
 * A Redis-backed check could not decide. Whether to admit (fail open) or refuse (fail closed)
 * is the caller's choice. `cause` holds what node-redis rejected with, if anything. Nothing
 * was counted, except that after a `RedisConnectionError` it is unknown whether Redis ran
 * the script.
 */
class RedisLimiterError extends RatelaneError {}
/** Redis could not be reached or the connection failed (refused, closed, timed out). */
class RedisConnectionError extends RedisLimiterError {}
/** Redis answered with an error (OOM, READONLY, a cluster redirection, a script error). */
class RedisServerError extends RedisLimiterError {}
/** The key holds something else (`RATELANE_STATE`, `WRONGTYPE`); it is left alone, except a key of the
 * algorithm's shape with a count out of range, which is reset (only this check fails). */
class RedisBadStateError extends RedisLimiterError {}
/** A job's window would end more than 2^52 ns from now (`RATELANE_RANGE`). */
class OutOfRangeError extends RedisLimiterError {}
/** Redis answered, but not with the layout the scripts document. */
class RedisBadReplyError extends RedisLimiterError {}

const REDIS_ERROR_CLASSES = Object.freeze({
  redis_connection: RedisConnectionError,
  redis_server: RedisServerError,
  redis_bad_state: RedisBadStateError,
  out_of_range: OutOfRangeError,
  redis_bad_reply: RedisBadReplyError,
})

/** Every code a limiter of this module throws or rejects with (`ratelane_redis::Error::ALL_CODES`). */
const REDIS_ERROR_CODES = Object.freeze(['invalid_config', 'insufficient_capacity', 'invalid_request', ...Object.keys(REDIS_ERROR_CLASSES)])

function redisError(code, message, cause) {
  const cls = REDIS_ERROR_CLASSES[code]
  return new cls(code, message, cause === undefined ? undefined : { cause })
}

/** The names of the classes in `error`'s prototype chain (node-redis's errors set no `name`). */
function classNames(error) {
  const names = new Set()
  for (let p = Object.getPrototypeOf(error); p && p !== Object.prototype; p = Object.getPrototypeOf(p)) {
    if (p.constructor && typeof p.constructor.name === 'string') names.add(p.constructor.name)
  }
  return names
}

// node-redis's errors (@redis/client lib/errors.js), by class name: another copy of the
// package (the application's own) has other class objects with the same names.
const CONNECTION_ERRORS = [
  'ConnectionTimeoutError', 'SocketTimeoutError', 'ClientClosedError', 'ClientOfflineError',
  'DisconnectsClientError', 'SocketClosedUnexpectedlyError', 'ReconnectStrategyError', 'TimeoutError',
  'RootNodesUnavailableError', 'AbortError',
]
const OTHER_CLIENT_ERRORS = ['WatchError', 'MaxCommandRedirectionsError', 'MultiErrorReply']
const SOCKET_CODES = new Set([
  'ECONNREFUSED', 'ECONNRESET', 'ECONNABORTED', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH',
  'ENOTFOUND', 'EAI_AGAIN', 'EADDRNOTAVAIL', 'ENETDOWN', 'ERR_SOCKET_CLOSED', 'ERR_STREAM_DESTROYED',
])

/** Whether `error` is Redis's `NOSCRIPT` error reply. */
function isNoScript(error) {
  return error instanceof Error && classNames(error).has('ErrorReply') && /^NOSCRIPT\b/.test(error.message)
}

/**
 * The `RedisLimiterError` for what node-redis (or the socket under it) rejected with, or
 * `null` for anything that is not a Redis failure (a bug: left to propagate).
 */
function failure(error) {
  if (!(error instanceof Error)) return null
  const names = classNames(error)
  const text = `${error.constructor && error.constructor.name ? error.constructor.name : 'Error'}: ${error.message}`
  if (names.has('ErrorReply')) {
    // An error reply. The scripts' own start with a code, as do Redis's.
    const code = error.message.split(' ', 1)[0]
    if (code === 'RATELANE_STATE' || code === 'WRONGTYPE') return redisError('redis_bad_state', error.message, error)
    if (code === 'RATELANE_RANGE') return redisError('out_of_range', error.message, error)
    // The in-memory store's refusal of the same call (a time past the end of the u64 clock).
    if (code === 'RATELANE_CLOCK') return new InvalidRequestError('invalid_request', error.message, { cause: error })
    return redisError('redis_server', `Redis answered with an error: ${text}`, error)
  }
  if (CONNECTION_ERRORS.some((n) => names.has(n)) || (typeof error.code === 'string' && SOCKET_CODES.has(error.code))) {
    return redisError('redis_connection', `Redis connection failed: ${text}`, error)
  }
  if (OTHER_CLIENT_ERRORS.some((n) => names.has(n))) {
    return redisError('redis_server', `Redis failed: ${text}`, error)
  }
  return null
}

/** A native error (the core's validation, a malformed reply) as the package's classes. */
function nativeError(error) {
  if (error && error.code === 'redis_bad_reply') return redisError('redis_bad_reply', error.message, error)
  return fromCoreError(error)
}

function callNative(f) {
  try {
    return f()
  } catch (error) {
    throw nativeError(error)
  }
}

// ------------------------------------------------------------------------------ scripts

/** One of the scripts: its text and the SHA-1 of its exact bytes, as `EVALSHA` takes it. */
class Script {
  constructor(text) {
    this.text = text
    this.sha = crypto.createHash('sha1').update(text, 'utf8').digest('hex')
  }
}

const GCRA = new Script(native.GCRA_LUA)
const LEAKY_BUCKET = new Script(native.LEAKY_BUCKET_LUA)
const FIXED_WINDOW = new Script(native.FIXED_WINDOW_LUA)
/** By `ServerLimit.script`. */
const SCRIPTS = { gcra: GCRA, leaky_bucket: LEAKY_BUCKET, fixed_window: FIXED_WINDOW }

/** A reply's top-level `Buffer`s (a client mapping blob strings to Buffers) as strings. A reply
 * longer than any script's (`MAX_REPLY_LEN`) is left as it is, unread: the native reader refuses
 * it by its length. */
function normalize(reply) {
  if (!Array.isArray(reply) || reply.length > native.MAX_REPLY_LEN) return reply
  return reply.map((item) => (Buffer.isBuffer(item) ? item.toString('utf8') : item))
}

/**
 * One script call: `EVALSHA` (one round trip), and only when Redis answers `NOSCRIPT` (a
 * fresh server, `SCRIPT FLUSH`, a failover) `EVAL` with the full text, which also caches it
 * for the next calls. Redis failures reject with `RedisLimiterError`s.
 */
async function evaluate(client, script, key, args) {
  const options = { keys: [key], arguments: args }
  try {
    try {
      return normalize(await client.evalSha(script.sha, options))
    } catch (error) {
      if (!isNoScript(error)) throw error
      return normalize(await client.eval(script.text, options))
    }
  } catch (error) {
    const mapped = failure(error)
    throw mapped === null ? error : mapped
  }
}

// ------------------------------------------------------------------------------ arguments

const LIMITER_OPTIONS = ['prefix', 'minTtlMs']

/**
 * Splits `options` into this module's (`prefix`, `minTtlMs`) and the rest (for the core),
 * refusing keys in neither list.
 */
function splitOptions(options, coreKeys) {
  if (options === undefined || options === null || typeof options !== 'object' || Array.isArray(options)) {
    throw new InvalidConfigError('invalid_config', 'options must be an object with at least a prefix (a string)')
  }
  const known = [...LIMITER_OPTIONS, ...coreKeys]
  for (const name of Object.keys(options)) {
    if (!known.includes(name)) {
      throw new InvalidArgumentError('invalid_argument', `unknown option "${name}"; expected one of: ${known.join(', ')}`)
    }
  }
  const rest = {}
  for (const name of coreKeys) if (options[name] !== undefined) rest[name] = options[name]
  return { prefix: options.prefix, minTtlMs: options.minTtlMs, rest }
}

function checkSetup(client, prefix, minTtlMs) {
  if (typeof prefix !== 'string') {
    throw new InvalidConfigError('invalid_config', `prefix must be a string, got ${describe(prefix)}`)
  }
  const ttl = minTtlMs === undefined || minTtlMs === null ? 0 : minTtlMs
  if (typeof ttl !== 'number' || !Number.isSafeInteger(ttl) || ttl < 0) {
    throw new InvalidConfigError('invalid_config', `minTtlMs must be an integer >= 0, got ${describe(minTtlMs)}`)
  }
  if (!client || typeof client.evalSha !== 'function' || typeof client.eval !== 'function') {
    throw new InvalidConfigError('invalid_config', `client must be a node-redis client (createClient or createCluster from npm redis), got ${describe(client)}`)
  }
  return ttl
}

function describe(value) {
  if (typeof value === 'string') return JSON.stringify(value)
  if (typeof value === 'bigint') return `${value}n`
  if (value === null || typeof value !== 'object') return String(value)
  return Array.isArray(value) ? 'an array' : `an object (${value.constructor ? value.constructor.name : 'null prototype'})`
}

/** `options.nowNs` for the native argument builders: a number, or a BigInt as its decimal text. */
function nowArg(options) {
  if (options === undefined || options === null) return null
  if (typeof options !== 'object' || Array.isArray(options)) {
    throw new InvalidArgumentError('invalid_argument', 'options must be an object ({ nowNs })')
  }
  for (const name of Object.keys(options)) {
    if (name !== 'nowNs') throw new InvalidArgumentError('invalid_argument', `unknown option "${name}"; expected: nowNs`)
  }
  const now = options.nowNs
  if (now === undefined || now === null) return null
  if (typeof now === 'bigint') {
    if (now < 0n || now >= 1n << 64n) throw new InvalidArgumentError('invalid_argument', `nowNs must be in 0..2^64, got ${now}n`)
    return now.toString()
  }
  if (typeof now !== 'number') throw new InvalidArgumentError('invalid_argument', 'nowNs must be a number or a BigInt')
  return now
}

// ------------------------------------------------------------------------------ limiters

/** What the three limiters share: one native limit (`ServerLimit`) and its script. */
class RedisLimiter {
  _setup(client, limit, prefix, minTtlMs) {
    callNative(() => limit.checkScript())
    const params = {}
    for (const [name, value] of limit.params) params[name.replace(/_(.)/g, (_, c) => c.toUpperCase())] = value
    Object.defineProperty(this, '_limit', { value: limit })
    Object.defineProperty(this, '_params', { value: params })
    const ttl = checkSetup(client, prefix, minTtlMs)
    /** The node-redis client every check goes through (left open: it is the caller's). */
    this.client = client
    /** Every key is `prefix + key`. */
    this.prefix = prefix
    /** Keys live at least this long (0: exactly until their state is empty again). */
    this.minTtlMs = ttl
  }

  _key(key) {
    if (typeof key !== 'string') throw new InvalidArgumentError('invalid_argument', `a key must be a string, got ${describe(key)}`)
    return this.prefix + key
  }

  /** One call of op `name` (`arg`: its weight or factor): the reply as the core reads it. */
  async _call(name, key, options, arg) {
    const redisKey = this._key(key)
    const args = callNative(() => this._limit.argv(name, nowArg(options), this.minTtlMs, arg))
    const reply = await evaluate(this.client, SCRIPTS[this._limit.script], redisKey, args)
    return callNative(() => this._limit.readReply(name, reply))
  }

  /** A check: the same decision object as the in-memory stores'. */
  async _decision(name, key, options, arg) {
    return serverObjects.fromFields(await this._call(name, key, options, arg))
  }
}

/**
 * GCRA per key in Redis (`redis/scripts/gcra.lua`): one request per `intervalNs`, `burst`
 * back to back; the same answers as `GcraStore`, shared by every process that uses the same
 * Redis and `prefix`.
 */
class RedisGcra extends RedisLimiter {
  /**
   * @param client a node-redis client (`createClient`, `createCluster`), connected; left open
   * @param intervalNs nanoseconds between two requests at the sustained rate
   * @param burst requests admitted back to back on an empty key
   * @param options `{ prefix, minTtlMs }`: `prefix` (required) starts every key, one per
   *   limiter; `minTtlMs` keeps keys at least that long (replays in virtual time; default 0)
   */
  constructor(client, intervalNs, burst, options) {
    super()
    const { prefix, minTtlMs } = splitOptions(options, [])
    this._setup(client, callNative(() => serverObjects.limits.gcra(intervalNs, burst)), prefix, minTtlMs)
  }

  /** `quota` requests per `windowNs`, all allowed back to back. */
  static perWindow(client, quota, windowNs, options) {
    const { prefix, minTtlMs } = splitOptions(options, [])
    const limiter = Object.create(RedisGcra.prototype)
    limiter._setup(client, callNative(() => serverObjects.limits.gcraPerWindow(quota, windowNs)), prefix, minTtlMs)
    return limiter
  }

  get intervalNs() {
    return this._params.intervalNs
  }

  get burst() {
    return this._params.burst
  }

  /** `burst × intervalNs`: the time a full burst takes to come back. */
  get windowNs() {
    return this._params.windowNs
  }

  /**
   * Checks one request for `key` at Redis's clock, and counts it if admitted. `options.nowNs`
   * replaces Redis's clock with integer nanoseconds of your own (a number or a BigInt; for
   * replaying fixed timestamps in tests: every caller of a key must then use the same clock).
   */
  async check(key, options) {
    return this.checkN(key, 1, options)
  }

  /**
   * Checks a request of weight `n` (`0` peeks: always allowed, counts nothing). Rejects with
   * `InsufficientCapacityError` when `n` exceeds the burst, and with `InvalidRequestError` when
   * `options.nowNs` is later than 2^64 - 1 - `windowNs` (as `GcraStore.check`), without a round
   * trip.
   */
  async checkN(key, n, options) {
    if (typeof n !== 'number') throw new InvalidArgumentError('invalid_argument', 'n must be a number')
    return this._decision('check_n', key, options, n)
  }
}

/**
 * A leaky bucket per key in Redis (`redis/scripts/leaky_bucket.lua`): `size` requests,
 * draining `dripSize` every `dripRateNs`, optionally at most one per `minIntervalNs`; the same
 * answers as `LeakyBucketStore`.
 */
class RedisLeakyBucket extends RedisLimiter {
  /** `options`: `{ prefix, minTtlMs, dripSize, minIntervalNs }` (`dripSize` defaults to 1). */
  constructor(client, size, dripRateNs, options) {
    super()
    const { prefix, minTtlMs, rest } = splitOptions(options, ['dripSize', 'minIntervalNs'])
    this._setup(client, callNative(() => serverObjects.limits.leakyBucket(size, dripRateNs, rest)), prefix, minTtlMs)
  }

  /**
   * From a legacy Misskey/Sharkey limit: `{ max, durationNs, minIntervalNs }` (translated by
   * the core) with `prefix` and `minTtlMs`.
   */
  static fromLegacy(client, limit) {
    const { prefix, minTtlMs, rest } = splitOptions(limit, ['max', 'durationNs', 'minIntervalNs'])
    const limiter = Object.create(RedisLeakyBucket.prototype)
    limiter._setup(client, callNative(() => serverObjects.limits.legacy(rest)), prefix, minTtlMs)
    return limiter
  }

  get size() {
    return this._params.size
  }

  get dripRateNs() {
    return this._params.dripRateNs
  }

  get dripSize() {
    return this._params.dripSize
  }

  /** At most one request per this many nanoseconds, or `null`. */
  get minIntervalNs() {
    return this._params.minIntervalNs
  }

  /** The time a full bucket takes to drain. */
  get windowNs() {
    return this._params.windowNs
  }

  /** Checks one request for `key` at Redis's clock (or `options.nowNs`, see `RedisGcra.check`). */
  async check(key, options) {
    return this._decision('check', key, options)
  }

  /**
   * `check` with the bucket scaled by `factor` in (0, 1] for this subject (the core's
   * `LeakyBucket::scaled`); `InvalidConfigError` otherwise, nothing sent.
   */
  async checkScaled(key, factor, options) {
    if (typeof factor !== 'number') throw new InvalidArgumentError('invalid_argument', 'factor must be a number')
    return this._decision('check_scaled', key, options, factor)
  }
}

/**
 * A fixed window per key (a group) in Redis (`redis/scripts/fixed_window.lua`): `quota` per
 * `windowNs`, with release-time estimates for delayed jobs; the same answers as
 * `FixedWindowStore`. Unlike the in-memory store, a group whose delayed jobs are never
 * released is forgotten one window after its last booked window (a job must start within its
 * window).
 */
class RedisFixedWindow extends RedisLimiter {
  /** `options`: `{ prefix, minTtlMs }`. */
  constructor(client, quota, windowNs, options) {
    super()
    const { prefix, minTtlMs } = splitOptions(options, [])
    this._setup(client, callNative(() => serverObjects.limits.fixedWindow(quota, windowNs)), prefix, minTtlMs)
  }

  get quota() {
    return this._params.quota
  }

  get windowNs() {
    return this._params.windowNs
  }

  /** Checks one request for `key` at Redis's clock (or `options.nowNs`, see `RedisGcra.check`). */
  async check(key, options) {
    return this._decision('check', key, options)
  }

  /**
   * Books a slot for one job of group `key`: `{ runNow, releaseAtNs, waiting, nowNs, delayNs }`.
   * `releaseAtNs` and `nowNs` (the clock the script used: Redis's, Unix nanoseconds) are
   * BigInts; `delayNs` is `releaseAtNs - nowNs` as a number, the wait without trusting the
   * local clock. A delayed job (`!runNow`) is `release`d when it starts (or is dropped).
   * Rejects with `OutOfRangeError` when the job's window would end more than 2^52 ns from now,
   * and with `InvalidRequestError` when the job would be released after 2^64 - 1 ns (as
   * `FixedWindowStore.schedule`); nothing is booked.
   */
  async schedule(key, options) {
    return this._call('schedule', key, options)
  }

  /** Records that one delayed job of `key` was released (or dropped); false if none waits. */
  async release(key, options) {
    return this._call('release', key, options)
  }
}

module.exports = {
  RedisGcra,
  RedisLeakyBucket,
  RedisFixedWindow,
  RedisLimiterError,
  RedisConnectionError,
  RedisServerError,
  RedisBadStateError,
  OutOfRangeError,
  RedisBadReplyError,
  REDIS_ERROR_CLASSES,
  REDIS_ERROR_CODES,
  GCRA_LUA: GCRA.text,
  LEAKY_BUCKET_LUA: LEAKY_BUCKET.text,
  FIXED_WINDOW_LUA: FIXED_WINDOW.text,
}
