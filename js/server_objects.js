// The plain objects the server-side stores answer with (js/CONTRACT.md, "Server-side limiters"),
// shared by both cores so their answers have one shape.
//
// Like driver.js, this file declares one function and nothing else at top level. The napi core
// embeds it (bindings-node/src/server.rs evaluates it once per Node environment); the wasm
// package's build appends an export line (bindings-wasm/build.sh) and its entries register the
// result with the module. `render` is the core's own header rendering
// (`ratelane::server::Decision::x_ratelimit_headers` / `ietf_headers`), called with the
// decision's fields: this file shapes objects and renders nothing itself.

/* eslint-disable no-unused-vars */
function createServerObjects(render) {
  'use strict'

  /** `X-RateLimit-*` headers (and `Retry-After` when blocked), as `[name, value]` pairs. */
  function xRateLimitHeaders() {
    return render.xRateLimitHeaders(
      this.allowed, this.limit, this.remaining, this.resetAfterNs, this.clearAfterNs,
      this.replenishAfterNs, this.windowNs,
    )
  }

  /** IETF `RateLimit-Policy` and `RateLimit` (and `Retry-After` when blocked) for `policy`. */
  function ietfHeaders(policy) {
    return render.ietfHeaders(
      this.allowed, this.limit, this.remaining, this.resetAfterNs, this.clearAfterNs,
      this.replenishAfterNs, this.windowNs, policy,
    )
  }

  // Own but not enumerable: JSON.stringify, spreading and deep equality see the data only.
  const methods = {
    xRateLimitHeaders: { value: xRateLimitHeaders, writable: true, configurable: true },
    ietfHeaders: { value: ietfHeaders, writable: true, configurable: true },
  }

  /** A `ratelane::server::Decision` as a plain object. */
  function decision(allowed, limit, remaining, resetAfterNs, clearAfterNs, replenishAfterNs, windowNs, retryAfterS) {
    return Object.defineProperties(
      { allowed, limit, remaining, resetAfterNs, clearAfterNs, replenishAfterNs, windowNs, retryAfterS },
      methods,
    )
  }

  /** A `ratelane::server::Scheduled` as a plain object. */
  function scheduled(runNow, releaseAtNs, waiting) {
    return { runNow, releaseAtNs, waiting }
  }

  return { decision, scheduled }
}
