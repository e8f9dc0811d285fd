// The objects the server-side stores answer with (js/CONTRACT.md, "Server-side limiters"),
// shared by both cores so their answers have one shape, and the Node package's stores.
//
// Like driver.js, this file declares one function and nothing else at top level. Each package's
// build appends an export line (bindings-node/build.js, bindings-wasm/build.sh) and its core
// entry calls it; no core evaluates it inside itself. `render` is the core's own header
// rendering (`ratelane::server::Decision::x_ratelimit_headers` / `ietf_headers`), called with
// the decision's fields: this file shapes objects and renders nothing itself. The renderers answer
// with one string, name and value on alternate lines (one crossing instead of an array of
// arrays of strings): the core's header names and values never hold a line break (values are
// numbers, or a policy name reduced to printable ASCII).
//
// Over `native` (the napi addon or the wasm module: `ServerLimit` and `ServerStore`, the
// core's one `Limit` and one `LimitStore`) it also writes the contract's `GcraStore`,
// `LeakyBucketStore` and `FixedWindowStore`: each picks its limit and names the ops it has;
// arguments are checked, and errors thrown, by the core module.

/* eslint-disable no-unused-vars */
function createServerObjects(render, native) {
  'use strict'

  /** `"name\nvalue\nname\nvalue"` as `[[name, value], ...]`. */
  function pairs(lines) {
    const parts = lines.split('\n')
    const out = []
    for (let i = 0; i + 1 < parts.length; i += 2) out.push([parts[i], parts[i + 1]])
    return out
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
      return pairs(render.xRateLimitHeaders(
        this.allowed, this.limit, this.remaining, this.resetAfterNs, this.clearAfterNs,
        this.replenishAfterNs, this.windowNs,
      ))
    }

    /** IETF `RateLimit-Policy` and `RateLimit` (and `Retry-After` when blocked) for `policy`. */
    ietfHeaders(policy) {
      return pairs(render.ietfHeaders(
        this.allowed, this.limit, this.remaining, this.resetAfterNs, this.clearAfterNs,
        this.replenishAfterNs, this.windowNs, policy,
      ))
    }
  }

  function decision(allowed, limit, remaining, resetAfterNs, clearAfterNs, replenishAfterNs, windowNs, retryAfterS) {
    return new ServerDecision(allowed, limit, remaining, resetAfterNs, clearAfterNs, replenishAfterNs, windowNs, retryAfterS)
  }

  /** A `ratelane::server::Scheduled`, a plain object. */
  function scheduled(runNow, releaseAtNs, waiting) {
    return { runNow, releaseAtNs, waiting }
  }

  const { ServerLimit, ServerStore } = native

  /** A native answer `[allowed, limit, ...]` as a decision. */
  function fromFields(f) {
    return new ServerDecision(f[0], f[1], f[2], f[3], f[4], f[5], f[6], f[7])
  }

  /** Passed instead of a config: the limit is the next argument (the static factories). */
  const BUILT = Symbol('built')

  /** What the three stores share: a native store over one native limit. */
  class Store {
    #store

    constructor(limit, options) {
      this.#store = new ServerStore(limit, options === undefined || options === null ? undefined : options.maxKeys)
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
      return fromFields(this.#store.apply('check', key, nowNs))
    }

    _apply(op, key, nowNs, arg) {
      return this.#store.apply(op, key, nowNs, arg)
    }
  }

  /** GCRA per key: one request per `intervalNs`, `burst` back to back. */
  class GcraStore extends Store {
    constructor(intervalNs, burst, options) {
      super(intervalNs === BUILT ? burst : ServerLimit.gcra(intervalNs, burst, options), options)
    }

    /** `quota` requests per `windowNs`, all of them allowed back to back. */
    static perWindow(quota, windowNs, options) {
      return new GcraStore(BUILT, ServerLimit.gcraPerWindow(quota, windowNs, options), options)
    }

    /** A request of weight `n`; throws `insufficient_capacity` when `n` exceeds the burst. */
    checkN(key, nowNs, n) {
      return fromFields(this._apply('check_n', key, nowNs, n))
    }
  }

  /** A leaky bucket per key (Sharkey's), optionally at most one request per `minIntervalNs`. */
  class LeakyBucketStore extends Store {
    constructor(size, dripRateNs, options) {
      super(size === BUILT ? dripRateNs : ServerLimit.leakyBucket(size, dripRateNs, options), options)
    }

    /** From a legacy Misskey/Sharkey limit `{ max, durationNs, minIntervalNs, maxKeys }`. */
    static fromLegacy(limit) {
      return new LeakyBucketStore(BUILT, ServerLimit.legacy(limit), limit)
    }

    /** One request with the bucket scaled by `factor` in (0, 1] for this subject. */
    checkScaled(key, nowNs, factor) {
      return fromFields(this._apply('check_scaled', key, nowNs, factor))
    }
  }

  /** A fixed window per key, with a release-time estimate for delayed jobs. */
  class FixedWindowStore extends Store {
    constructor(quota, windowNs, options) {
      super(ServerLimit.fixedWindow(quota, windowNs, options), options)
    }

    /** Books a slot for one job of group `key`: it runs now, or at `releaseAtNs`. */
    schedule(key, nowNs) {
      const [runNow, releaseAtNs, waiting] = this._apply('schedule', key, nowNs)
      return scheduled(runNow, releaseAtNs, waiting)
    }

    /** Records that one delayed job of `key` was released (or dropped); false if none waits. */
    release(key, nowNs) {
      return this._apply('release', key, nowNs)
    }
  }

  return { decision, scheduled, fromFields, GcraStore, LeakyBucketStore, FixedWindowStore }
}
