// The objects the server-side stores answer with (js/CONTRACT.md, "Server-side limiters"),
// shared by both cores so their answers have one shape.
//
// Like driver.js, this file declares one function and nothing else at top level. The napi core
// embeds it (bindings-node/src/server.rs evaluates it once per Node environment); the wasm
// package's build appends an export line (bindings-wasm/build.sh) and its entries register the
// result with the module. `render` is the core's own header rendering
// (`ratelane::server::Decision::x_ratelimit_headers` / `ietf_headers`), called with the
// decision's fields: this file shapes objects and renders nothing itself. The renderers answer
// with one string, name and value on alternate lines (one crossing instead of an array of
// arrays of strings): the core's header names and values never hold a line break (values are
// numbers, or a policy name reduced to printable ASCII).

/* eslint-disable no-unused-vars */
function createServerObjects(render) {
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

  return { decision, scheduled }
}
