// The Redis store of the Promise driver's shared mode (`new RateLimiter({ shared: store })`,
// js/CONTRACT.md "Shared mode"), over a node-redis client (npm `redis`, v4 to v6: only
// `sendCommand`, `connect`, `isReady` and `destroy`/`disconnect` are used).
//
// Written once, like driver.js, as a factory with no `require`, `import` or `export` and no
// Node-only API: `createRedisStore({ ratelane, script, sha, connect, randomId })` returns
// `{ RedisStore, reserveArgs, recordArgs, parseAnswer }`. Each package's build appends one
// export line (bindings-node/build.js makes redis_store.cjs); the package passes
//   ratelane   its driver module (for InvalidConfigError),
//   script     the text of redis/scripts/shared_store.lua (THE store script, never a copy),
//   sha        optional: the SHA-1 of `script` in hex; without it SCRIPT LOAD asks Redis once,
//   connect    optional: (url, { connectTimeout }) => a node-redis client, not yet connected,
//              so that `new RedisStore('redis://...')` works,
//   randomId   optional: () => a unique string (the default client name).
//
// What goes to Redis and what it means is the script's and the core's; this file only encodes
// arguments, queues, batches and times out. Redis misbehaving never throws: a reservation
// then rejects (the driver answers `unavailable` to the core) and an update is dropped.

/* eslint-disable no-unused-vars */
function createRedisStore(deps) {
  'use strict'

  const { ratelane, script } = deps
  if (!ratelane || typeof ratelane.InvalidConfigError !== 'function' || typeof script !== 'string' || script === '') {
    throw new Error('createRedisStore needs { ratelane, script }')
  }
  const { InvalidConfigError } = ratelane

  function badOption(message) {
    return new InvalidConfigError('invalid_config', `invalid configuration: ${message}`)
  }

  const POLICIES = ['fail_open', 'fail_closed']
  /** camelCase option (ms) -> the core's SharedConfig key (ns). */
  const DURATIONS = {
    lease: 'lease_ns',
    pioneerPoll: 'pioneer_poll_ns',
    stateTtl: 'state_ttl_ns',
    retryBase: 'retry_base_ns',
    retryMax: 'retry_max_ns',
  }
  const OPTIONS = new Set(['prefix', 'timeout', 'onUnavailable', 'clientName', 'globalLease'].concat(Object.keys(DURATIONS)))
  /** Updates kept while Redis is away; beyond this the oldest are dropped. */
  const MAX_QUEUED = 10000
  /** Operations per script call. */
  const BATCH = 256

  const clock = typeof performance !== 'undefined' && performance && typeof performance.now === 'function'
    ? () => performance.now()
    : () => Date.now()

  // ---------------------------------------------------------------- the script's arguments

  const optStr = (v) => (v === null || v === undefined ? '' : '=' + v)
  const optNum = (v) => (v === null || v === undefined ? '' : String(v))
  const flag = (v) => (v ? '1' : '0')

  /** The script's ARGV after the common part for a reservation (the script's header). */
  function reserveArgs(r) {
    return [
      String(r.id), r.identity, r.route, r.major, optStr(r.bucket), flag(r.countsGlobal),
      String(r.globalLimit), String(r.globalWindowNs), String(r.marginNs),
      String(r.invalidLimit), String(r.invalidWindowNs),
      // A reservation object of an earlier version has no globalWant: one token.
      r.globalWant === undefined ? '1' : String(r.globalWant),
      // After a store outage (absent from a reservation object of an earlier version).
      r.processesSinceNs === undefined || r.processesSinceNs === null ? '' : String(r.processesSinceNs),
      flag(r.reporting),
      ages(r.unrecordedNs),
      ages(r.grantedNs),
    ]
  }

  /** A report's ages (ns) as the script takes them: decimal integers separated by ','. */
  function ages(list) {
    return Array.isArray(list) ? list.map((n) => BigInt(n).toString()).join(',') : ''
  }

  /** The script's ARGV after the common part for a shared update (by its `kind`). */
  function recordArgs(u) {
    switch (u.kind) {
      case 'bucket':
        return ['bucket', String(u.id), u.identity, u.route, u.major, optStr(u.bucket), flag(u.unlimited),
          optNum(u.limit), optNum(u.remaining), optNum(u.resetAfterNs), optNum(u.windowNs)]
      case 'release':
        return ['release', String(u.id), u.identity, u.route, u.major, optStr(u.bucket), flag(u.reached),
          optNum(u.windowNs)]
      case 'hold':
        return ['hold', u.scope, u.identity, u.route, u.major, optStr(u.bucket), String(u.retryAfterNs)]
      case 'invalid':
        return ['invalid', String(u.id), String(u.windowNs)]
      default:
        throw new TypeError(`not a shared-mode update: ${JSON.stringify(u)}`)
    }
  }

  /** A reply's string (node-redis gives a string, or a Buffer with `returnBuffers`); `''` for
   * anything else, which is never converted (an array's `toString` would walk all of it). */
  const text = (v) => {
    if (typeof v === 'string') return v
    if (typeof v === 'number' || typeof v === 'bigint') return String(v)
    if (v instanceof Uint8Array) return typeof Buffer !== 'undefined' && Buffer.isBuffer(v) ? v.toString('utf8') : new TextDecoder().decode(v)
    return ''
  }

  const count = (v) => {
    const n = typeof v === 'bigint' ? Number(v) : v
    return typeof n === 'number' && Number.isSafeInteger(n) && n >= 0 ? n : undefined
  }

  /** The script's reply to a reservation as a `ReservationAnswer`; throws on anything else.
   * The trailing live-process count becomes `processes`, a grant's lease count `leased` and
   * the script's clock `storeTimeUs` (all absent from a script of an earlier version's reply). */
  function parseAnswer(reply) {
    if (Array.isArray(reply) && reply.length > 0) {
      const tag = text(reply[0])
      if (tag === 'granted' && reply.length === 1) return { answer: 'granted' }
      if (tag === 'granted' && reply.length <= 4 && reply.slice(1).every((n) => count(n) !== undefined)) {
        const answer = { answer: 'granted', processes: count(reply[1]) }
        if (reply.length >= 3) answer.leased = count(reply[2])
        if (reply.length === 4) answer.storeTimeUs = count(reply[3])
        return answer
      }
      if (tag === 'denied' && (reply.length === 3 || reply.length === 4)) {
        const us = typeof reply[1] === 'bigint' ? Number(reply[1]) : reply[1]
        const processes = reply.length === 4 ? count(reply[3]) : undefined
        if (typeof us === 'number' && Number.isSafeInteger(us) && us >= 0 && (reply.length === 3 || processes !== undefined)) {
          // (Beyond 2^53 ns the wait is passed as the largest exact number: the core clamps
          // every wait to its max_server_wait, whatever the store says.)
          const answer = { answer: 'denied', retryAfterNs: Math.min(us * 1000, Number.MAX_SAFE_INTEGER), scope: text(reply[2]) }
          if (processes !== undefined) answer.processes = processes
          return answer
        }
      }
    }
    throw new Error(`unexpected reply from the shared store script: ${describeReply(reply)}`)
  }

  /** What a reply is, for a message: its kind and size, and the first few of a short array's
   * scalar elements; never the whole of it (a reply may hold a million elements, or be nested
   * ten thousand deep). */
  function describeReply(reply) {
    if (Array.isArray(reply)) {
      if (reply.length > 8) return `an array of ${reply.length} elements`
      return '[' + reply.map((item) => (Array.isArray(item) ? `an array of ${item.length} elements` : scalar(item))).join(', ') + ']'
    }
    return scalar(reply)
  }

  function scalar(value) {
    if (value === null || value === undefined) return String(value)
    if (typeof value === 'number' || typeof value === 'bigint' || typeof value === 'boolean') return String(value)
    if (typeof value === 'string') return JSON.stringify(value.length > 64 ? value.slice(0, 64) + '...' : value)
    if (typeof Buffer !== 'undefined' && Buffer.isBuffer(value)) return `a buffer of ${value.length} bytes`
    return `a value of type ${typeof value}`
  }

  function isNoScript(reply) {
    return reply instanceof Error && /^NOSCRIPT/.test(String(reply.message))
  }

  function randomId() {
    if (typeof deps.randomId === 'function') return deps.randomId()
    return Date.now().toString(16) + '-' + Math.random().toString(16).slice(2) + Math.random().toString(16).slice(2)
  }

  function withTimeout(promise, ms) {
    let timer
    const limit = new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(`Redis did not answer within ${ms} ms`)), ms)
    })
    return Promise.race([promise, limit]).finally(() => clearTimeout(timer))
  }

  // ---------------------------------------------------------------- the store

  /**
   * The shared store in Redis, for `new RateLimiter({ shared: store })`.
   *
   * `clientOrUrl`: a node-redis client (connected by the caller, left open by `close()`; give
   * it an 'error' listener, as node-redis requires), or a URL (`redis://host:port/db`) for a
   * client this store creates, connects and closes. Options (durations in ms):
   * `prefix` (default '{ratelane}:': every key starts with it; the same for every process of
   * one bot, with a Redis Cluster hash tag), `timeout` (250: a reservation not answered by then
   * is "unavailable" to the core), `onUnavailable` ('fail_open' or 'fail_closed'), `lease`,
   * `pioneerPoll`, `stateTtl`, `retryBase`, `retryMax` (the core's SharedConfig; the first
   * three must be the same in every process), `clientName` (default: random).
   */
  class RedisStore {
    constructor(clientOrUrl, options) {
      const opts = options === undefined || options === null ? {} : options
      if (typeof opts !== 'object' || Array.isArray(opts)) throw badOption('RedisStore options must be an object')
      for (const name of Object.keys(opts)) {
        if (!OPTIONS.has(name)) throw badOption(`unknown RedisStore option "${name}"; expected one of: ${[...OPTIONS].join(', ')}`)
      }
      const onUnavailable = opts.onUnavailable === undefined ? 'fail_open' : opts.onUnavailable
      if (!POLICIES.includes(onUnavailable)) {
        throw badOption(`onUnavailable must be 'fail_open' or 'fail_closed', got ${String(onUnavailable)}`)
      }
      const prefix = opts.prefix === undefined ? '{ratelane}:' : opts.prefix
      if (typeof prefix !== 'string' || prefix === '') throw badOption('prefix must be a non-empty string')
      const timeout = opts.timeout === undefined ? 250 : opts.timeout
      if (typeof timeout !== 'number' || !Number.isFinite(timeout) || timeout <= 0) {
        throw badOption(`timeout must be a finite number of milliseconds > 0, got ${String(timeout)}`)
      }
      const clientName = opts.clientName === undefined ? randomId() : opts.clientName
      if (typeof clientName !== 'string' || clientName === '') throw badOption('clientName must be a non-empty string')
      const globalLease = opts.globalLease === undefined ? true : opts.globalLease
      if (typeof globalLease !== 'boolean') throw badOption(`globalLease must be a boolean, got ${String(globalLease)}`)
      const settings = { on_unavailable: onUnavailable, global_lease: globalLease }
      for (const name of Object.keys(DURATIONS)) {
        const value = opts[name]
        if (value === undefined) continue
        if (typeof value !== 'number' || !Number.isFinite(value) || value < 0) {
          throw badOption(`${name} must be a finite number of milliseconds >= 0, got ${String(value)}`)
        }
        settings[DURATIONS[name]] = Math.round(value * 1e6)
      }
      if (typeof clientOrUrl === 'string') {
        if (typeof deps.connect !== 'function') throw badOption('give a connected node-redis client, not a URL, here')
        this._client = deps.connect(clientOrUrl, { connectTimeout: timeout })
        if (this._client && typeof this._client.on === 'function') {
          this._client.on('error', (error) => { this.lastError = error }) // reconnects on its own
        }
        this._owns = true
      } else {
        this._client = clientOrUrl
        this._owns = false
      }
      if (!this._client || typeof this._client.sendCommand !== 'function') {
        throw badOption('the first argument must be a node-redis client (createClient() of the redis package) or a redis:// URL')
      }
      /** Every key starts with it. */
      this.prefix = prefix
      /** ms to wait for a reservation's answer (the driver reads it). */
      this.timeout = timeout
      /** This process's name in the store. */
      this.clientName = clientName
      /** Updates dropped because Redis could not take them (down, or an error reply). */
      this.dropped = 0
      /** The last error the client or Redis reported, for logs. */
      this.lastError = null
      this._settings = settings
      this._common = null
      this._sha = typeof deps.sha === 'string' ? deps.sha : null
      this._queue = []
      this._running = false
      this._idleWaiters = []
      this._connecting = null
      this._connected = !this._owns
      this._closed = false
    }

    /** The core's `shared` settings (ratelane::json: snake_case, ns). */
    coreSettings() {
      return Object.assign({}, this._settings)
    }

    /** Takes the settings the core validated (`limiter.config.shared`). */
    bind(sharedConfig) {
      this._common = [
        '', // now: Redis's clock
        this.clientName,
        String(sharedConfig.lease_ns),
        String(sharedConfig.pioneer_poll_ns),
        String(sharedConfig.state_ttl_ns),
      ]
    }

    /** Queues a reservation; resolves with its answer, rejects when Redis gives none. */
    reserve(reservation) {
      return new Promise((resolve, reject) => {
        if (this._common === null) throw new Error('RedisStore.bind was not called (give the store to a RateLimiter)')
        const args = ['reserve'].concat(this._common, reserveArgs(reservation))
        this._submit({ args, resolve, reject, at: clock() })
      })
    }

    /** Queues an update, fire-and-forget. */
    record(update) {
      if (this._closed || this._common === null) {
        this.dropped += 1
        return
      }
      if (this._queue.length >= MAX_QUEUED) {
        const i = this._queue.findIndex((op) => op.resolve === null)
        if (i >= 0) {
          this._queue.splice(i, 1)
          this.dropped += 1
        }
      }
      this._submit({ args: ['record'].concat(this._common, recordArgs(update)), resolve: null, reject: null, at: clock() })
    }

    /**
     * Resolves once every queued call has been sent and answered, or dropped, or after
     * `timeout` ms (default 4 x the store's timeout). Never rejects.
     */
    flush(timeout) {
      if (!this._running && this._queue.length === 0) return Promise.resolve()
      const limit = timeout === undefined ? 4 * this.timeout : timeout
      return new Promise((resolve) => {
        const timer = setTimeout(done, Math.max(0, limit))
        function done() {
          clearTimeout(timer)
          resolve()
        }
        this._idleWaiters.push(done)
      })
    }

    /** Sends what is queued (bounded by `flush`), stops, and closes the client if this store made it. Idempotent. */
    async close() {
      if (this._closed) return
      await this.flush()
      this._closed = true
      const queue = this._queue
      this._queue = []
      for (const op of queue) {
        if (op.reject !== null) op.reject(new Error('the Redis store is closed'))
      }
      if (this._owns) {
        const client = this._client
        try {
          if (typeof client.destroy === 'function') client.destroy()
          else if (typeof client.disconnect === 'function') await client.disconnect()
        } catch (_) { /* closed already */ }
      }
    }

    // ---------------------------------------------------------------- the queue

    _submit(op) {
      if (this._closed) {
        if (op.reject !== null) op.reject(new Error('the Redis store is closed'))
        return
      }
      this._queue.push(op)
      if (!this._running) {
        this._running = true
        // Everything queued in this turn (one drain of the core) goes as one script call.
        Promise.resolve().then(() => this._run()).catch((error) => { this.lastError = error })
      }
    }

    async _run() {
      try {
        while (this._queue.length > 0) {
          const batch = []
          const now = clock()
          while (this._queue.length > 0 && batch.length < BATCH) {
            const op = this._queue.shift()
            if (op.resolve !== null && now - op.at >= this.timeout) {
              // The driver has answered "unavailable" already: do not take a grant nobody uses.
              op.reject(new Error('not sent: waited longer than the store timeout'))
              continue
            }
            batch.push(op)
          }
          if (batch.length === 0) continue
          let replies
          try {
            replies = await withTimeout(this._send(batch), Math.max(2 * this.timeout, 1000))
          } catch (error) {
            this.lastError = error
            for (const op of batch) this._fail(op, error)
            continue
          }
          for (let i = 0; i < batch.length; i++) this._settle(batch[i], replies[i])
        }
      } finally {
        this._running = false
        const waiters = this._idleWaiters
        this._idleWaiters = []
        for (const w of waiters) w()
      }
    }

    async _ready() {
      const client = this._client
      if (!this._connected) {
        if (this._connecting === null) {
          this._connecting = Promise.resolve()
            .then(() => client.connect())
            .then(() => { this._connected = true })
            .finally(() => { this._connecting = null })
        }
        await this._connecting
      }
      // A client reconnecting (Redis down) would queue commands for later: answer now instead.
      if (client.isReady === false) throw new Error('Redis is not connected')
      if (this._sha === null) this._sha = text(await client.sendCommand(['SCRIPT', 'LOAD', script]))
      return client
    }

    async _send(batch) {
      const client = await this._ready()
      let replies = await this._pipeline(client, batch, false)
      // A server that lost its script cache (a fresh server, a restart, SCRIPT FLUSH, a
      // failover) answers NOSCRIPT from the first call on: send those calls again in order,
      // the first with EVAL (which caches the script for the others).
      const first = replies.findIndex(isNoScript)
      if (first >= 0) replies = replies.slice(0, first).concat(await this._pipeline(client, batch.slice(first), true))
      return replies
    }

    /**
     * One reply per op. Several ops go as one `batch` call of the script (one EVALSHA, each op
     * run as its own call would, in order); an op the script refused gets its error, and a
     * failed call (NOSCRIPT, an error reply, a lost connection) is every op's reply.
     */
    async _pipeline(client, ops, evalFirst) {
      let args = ops[0].args
      if (ops.length > 1) {
        // An op's own call is [op, now, client, lease, poll, ttl, ...rest].
        args = ['batch'].concat(this._common)
        for (const op of ops) args.push(String(op.args.length - 5), op.args[0], ...op.args.slice(6))
      }
      const command = (evalFirst ? ['EVAL', script] : ['EVALSHA', this._sha]).concat(['1', this.prefix], args)
      let reply
      try {
        reply = await client.sendCommand(command)
      } catch (error) {
        reply = error instanceof Error ? error : new Error(String(error))
      }
      if (ops.length === 1 || reply instanceof Error) return ops.map(() => reply)
      if (!Array.isArray(reply) || reply.length !== ops.length) {
        throw new Error(`the shared store answered a batch of ${ops.length} with ${describeReply(reply)}`)
      }
      return reply.map((item) => (Array.isArray(item) && item.length === 2 && text(item[0]) === 'error'
        ? new Error(text(item[1]))
        : item))
    }

    _fail(op, error) {
      if (op.reject === null) this.dropped += 1
      else op.reject(error)
    }

    _settle(op, reply) {
      if (reply instanceof Error) {
        this.lastError = reply
        this._fail(op, reply)
        return
      }
      if (op.resolve === null) return
      try {
        op.resolve(parseAnswer(reply))
      } catch (error) {
        op.reject(error)
      }
    }
  }

  return { RedisStore, reserveArgs, recordArgs, parseAnswer }
}
