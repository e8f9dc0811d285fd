// The objects the server-side stores answer with (js/CONTRACT.md, "Server-side limiters"),
// shared by both cores so their answers have one shape, and the Node package's stores.
//
// Like driver.js, this file declares one function and nothing else at top level. Each package's
// build appends an export line (bindings-node/build.js, bindings-wasm/build.sh) and its core
// entry calls it; no core evaluates it inside itself.
//
// Over `native` (the napi addon or the wasm module: `ServerLimit` and `ServerStore`, the
// core's one `Limit` and one `LimitStore`, and `renderHeaders`, the core's
// `Decision::x_ratelimit_headers` / `ietf_headers`) it writes the contract's `GcraStore`,
// `LeakyBucketStore` and `FixedWindowStore`: each picks its limit and names the ops it has.
// The JS types of the arguments are checked here, once for both packages, and a wrong one
// throws `invalid_argument`; ranges and configs are checked by the core module
// (`bindings-js-common/src/server.rs`), which throws the same codes. Answers cross as numbers
// (booleans 0 / 1, an absent value NaN) and headers as one string, name and value on
// alternate lines; this file shapes them and renders nothing itself.

/* eslint-disable no-unused-vars */
function createServerObjects(native) {
  'use strict'

  const { ServerLimit, ServerStore, renderHeaders } = native

  // ------------------------------------------------------------------ arguments

  /** A wrong JS value, thrown as the core module throws one. */
  function argumentError(message) {
    const error = new Error(message)
    error.code = 'invalid_argument'
    return error
  }

  /** How a JS value's type reads in a message. */
  function typeName(value) {
    if (value === null) return 'null'
    if (Array.isArray(value)) return 'an array'
    const type = typeof value
    return type === 'undefined' ? type : (type === 'object' ? 'an object' : `a ${type}`)
  }

  function number(value, what) {
    if (typeof value !== 'number') throw argumentError(`${what} must be a number, got ${typeName(value)}`)
    return value
  }

  /** A number, or `undefined` for absent, `undefined` and `null`. */
  function optional(value, what) {
    return value === undefined || value === null ? undefined : number(value, what)
  }

  /** An options object (`{}` for `undefined` / `null`) whose keys are all in `known`. */
  function options(value, what, known) {
    if (value === undefined || value === null) return {}
    if (typeof value !== 'object' || Array.isArray(value)) {
      throw argumentError(`${what} must be an object, got ${typeName(value)}`)
    }
    for (const key of Object.keys(value)) {
      if (!known.includes(key)) throw argumentError(`unknown option "${key}"; expected one of: ${known.join(', ')}`)
    }
    return value
  }

  const STORE = ['maxKeys']

  /**
   * The native limits, by the factory that names them (the Redis limiters use these too). Each
   * takes the numbers of `bindings-js-common/src/server.rs`, `limit`.
   */
  const limits = {
    gcra(intervalNs, burst, opts) {
      options(opts, 'options', STORE)
      return new ServerLimit('gcra', number(intervalNs, 'intervalNs'), number(burst, 'burst'))
    },
    gcraPerWindow(quota, windowNs, opts) {
      options(opts, 'options', STORE)
      return new ServerLimit('gcraPerWindow', number(quota, 'quota'), number(windowNs, 'windowNs'))
    },
    leakyBucket(size, dripRateNs, opts) {
      const o = options(opts, 'options', ['dripSize', 'minIntervalNs', ...STORE])
      return new ServerLimit('leakyBucket', number(size, 'size'), number(dripRateNs, 'dripRateNs'),
        optional(o.dripSize, 'dripSize'), optional(o.minIntervalNs, 'minIntervalNs'))
    },
    legacy(limit) {
      if (limit === undefined || limit === null) throw argumentError('limit must be an object')
      const o = options(limit, 'limit', ['max', 'durationNs', 'minIntervalNs', ...STORE])
      return new ServerLimit('legacy', optional(o.max, 'max'), optional(o.durationNs, 'durationNs'),
        optional(o.minIntervalNs, 'minIntervalNs'))
    },
    fixedWindow(quota, windowNs, opts) {
      options(opts, 'options', STORE)
      return new ServerLimit('fixedWindow', number(quota, 'quota'), number(windowNs, 'windowNs'))
    },
  }

  // ------------------------------------------------------------------ answers

  /** `"name\nvalue\nname\nvalue"` as `[[name, value], ...]`. */
  function pairs(lines) {
    const parts = lines.split('\n')
    const out = []
    for (let i = 0; i + 1 < parts.length; i += 2) out.push([parts[i], parts[i + 1]])
    return out
  }

  /** A decision's fields as `renderHeaders` takes them. */
  function renderFields(d) {
    if (typeof d.allowed !== 'boolean') throw argumentError(`decision.allowed must be a boolean, got ${typeName(d.allowed)}`)
    const replenish = optional(d.replenishAfterNs, 'decision.replenishAfterNs')
    if (Number.isNaN(replenish)) throw argumentError('decision.replenishAfterNs must be a number or null, got NaN')
    return [d.allowed ? 1 : 0, number(d.limit, 'decision.limit'), number(d.remaining, 'decision.remaining'),
      number(d.resetAfterNs, 'decision.resetAfterNs'), number(d.clearAfterNs, 'decision.clearAfterNs'),
      replenish === undefined ? NaN : replenish, number(d.windowNs, 'decision.windowNs')]
  }

  /**
   * A `ratelane::server::Decision`: the data fields are the object's own (enumerable)
   * properties; the two header methods live on the shared prototype, so that JSON, spreading
   * and `Object.keys` see the data only and making a decision costs no more than a literal.
   */
  class ServerDecision {
    constructor(allowed, limit, remaining, resetAfterNs, clearAfterNs, replenishAfterNs, windowNs, retryAfterS) {
      this.allowed = allowed
      this.limit = limit
      this.remaining = remaining
      this.resetAfterNs = resetAfterNs
      this.clearAfterNs = clearAfterNs
      this.replenishAfterNs = replenishAfterNs
      this.windowNs = windowNs
      this.retryAfterS = retryAfterS
    }

    /** `X-RateLimit-*` headers (and `Retry-After` when blocked), as `[name, value]` pairs. */
    xRateLimitHeaders() {
      return pairs(renderHeaders(null, renderFields(this)))
    }

    /** IETF `RateLimit-Policy` and `RateLimit` (and `Retry-After` when blocked) for `policy`. */
    ietfHeaders(policy) {
      if (typeof policy !== 'string') throw argumentError(`policy must be a string, got ${typeName(policy)}`)
      return pairs(renderHeaders(policy, renderFields(this)))
    }
  }

  function decision(allowed, limit, remaining, resetAfterNs, clearAfterNs, replenishAfterNs, windowNs, retryAfterS) {
    return new ServerDecision(allowed, limit, remaining, resetAfterNs, clearAfterNs, replenishAfterNs, windowNs, retryAfterS)
  }

  /** A `ratelane::server::Scheduled`, a plain object. */
  function scheduled(runNow, releaseAtNs, waiting) {
    return { runNow, releaseAtNs, waiting }
  }

  const orNull = (value) => (Number.isNaN(value) ? null : value)

  /** A decision as it crosses, `[allowed, limit, ...]` (see the header), as a decision. */
  function fromFields(f) {
    return new ServerDecision(f[0] === 1, f[1], f[2], f[3], f[4], orNull(f[5]), f[6], orNull(f[7]))
  }

  // ------------------------------------------------------------------ stores

  /** Passed instead of a config: the limit is the next argument (the static factories). */
  const BUILT = Symbol('built')

  /** What the three stores share: a native store over one native limit. */
  class Store {
    #store

    constructor(limit, options) {
      const maxKeys = options === undefined || options === null ? undefined : optional(options.maxKeys, 'maxKeys')
      this.#store = new ServerStore(limit, maxKeys)
    }

    /** Keys currently stored. */
    get len() {
      return this.#store.len
    }

    /** New keys answered without being stored because the store was full of live keys. */
    get untracked() {
      return this.#store.untracked
    }

    /** The bound on stored keys. */
    get maxKeys() {
      return this.#store.maxKeys
    }

    /** Checks one request for `key` at `nowNs`, and counts it if admitted. */
    check(key, nowNs) {
      return fromFields(this._apply('check', key, nowNs))
    }

    _apply(op, key, nowNs, arg) {
      if (typeof key !== 'string') throw argumentError(`key must be a string, got ${typeName(key)}`)
      return this.#store.apply(op, key, number(nowNs, 'nowNs'), arg)
    }
  }

  /** GCRA per key: one request per `intervalNs`, `burst` back to back. */
  class GcraStore extends Store {
    constructor(intervalNs, burst, options) {
      super(intervalNs === BUILT ? burst : limits.gcra(intervalNs, burst, options), options)
    }

    /** `quota` requests per `windowNs`, all of them allowed back to back. */
    static perWindow(quota, windowNs, options) {
      return new GcraStore(BUILT, limits.gcraPerWindow(quota, windowNs, options), options)
    }

    /** A request of weight `n`; throws `insufficient_capacity` when `n` exceeds the burst. */
    checkN(key, nowNs, n) {
      return fromFields(this._apply('check_n', key, nowNs, number(n, 'n')))
    }
  }

  /** A leaky bucket per key (Sharkey's), optionally at most one request per `minIntervalNs`. */
  class LeakyBucketStore extends Store {
    constructor(size, dripRateNs, options) {
      super(size === BUILT ? dripRateNs : limits.leakyBucket(size, dripRateNs, options), options)
    }

    /** From a legacy Misskey/Sharkey limit `{ max, durationNs, minIntervalNs, maxKeys }`. */
    static fromLegacy(limit) {
      return new LeakyBucketStore(BUILT, limits.legacy(limit), limit)
    }

    /** One request with the bucket scaled by `factor` in (0, 1] for this subject. */
    checkScaled(key, nowNs, factor) {
      return fromFields(this._apply('check_scaled', key, nowNs, number(factor, 'factor')))
    }
  }

  /** A fixed window per key, with a release-time estimate for delayed jobs. */
  class FixedWindowStore extends Store {
    constructor(quota, windowNs, options) {
      super(limits.fixedWindow(quota, windowNs, options), options)
    }

    /** Books a slot for one job of group `key`: it runs now, or at `releaseAtNs`. */
    schedule(key, nowNs) {
      const booked = this._apply('schedule', key, nowNs)
      return scheduled(booked[0] === 1, booked[1], booked[2])
    }

    /** Records that one delayed job of `key` was released (or dropped); false if none waits. */
    release(key, nowNs) {
      return this._apply('release', key, nowNs)[0] === 1
    }
  }

  return { decision, scheduled, fromFields, limits, GcraStore, LeakyBucketStore, FixedWindowStore }
}
