// What the replays of tests/vectors/server_*.json share: building the in-memory store a case's
// `config` describes, and reading a decision into the vectors' JSON form. Used by
// js/test/server_vectors.test.js (either core) and bindings-node/test/redis_limiters.test.js
// (the Redis limiters against the in-memory stores). Loads no core itself.
'use strict'
const assert = require('node:assert/strict')

const MS = 1e6

/** `*_ms` config fields as nanoseconds; absent stays undefined. */
function ns(config, field) {
  return config[field] === undefined ? undefined : config[field] * MS
}

/**
 * The in-memory store a case's `config` describes, built as a user of the package would from
 * `classes` (`{ GcraStore, LeakyBucketStore, FixedWindowStore }` of a core or the package).
 */
function inMemoryStore(classes, algorithm, config) {
  const { GcraStore, LeakyBucketStore, FixedWindowStore } = classes
  const options = { maxKeys: config.max_keys }
  switch (algorithm) {
    case 'gcra':
      return 'quota' in config
        ? GcraStore.perWindow(config.quota, ns(config, 'window_ms'), options)
        : new GcraStore(ns(config, 'interval_ms'), config.burst, options)
    case 'leaky_bucket': {
      if ('legacy' in config) {
        const legacy = config.legacy
        return LeakyBucketStore.fromLegacy({
          max: legacy.max,
          durationNs: ns(legacy, 'duration_ms'),
          minIntervalNs: ns(legacy, 'min_interval_ms'),
          maxKeys: config.max_keys,
        })
      }
      return new LeakyBucketStore(config.size, ns(config, 'drip_rate_ms'), {
        dripSize: config.drip_size,
        minIntervalNs: ns(config, 'min_interval_ms'),
        maxKeys: config.max_keys,
      })
    }
    case 'fixed_window':
      return new FixedWindowStore(config.quota, ns(config, 'window_ms'), options)
    default:
      return assert.fail(`unknown algorithm ${algorithm}`)
  }
}

const DECISION_FIELDS = ['allowed', 'limit', 'remaining', 'resetAfterNs', 'clearAfterNs', 'replenishAfterNs', 'windowNs', 'retryAfterS']

/** A decision object in the vectors' form; also checks its shape (js/CONTRACT.md). */
function decisionForm(d, policy) {
  assert.deepEqual(Reflect.ownKeys(d), DECISION_FIELDS, 'a decision owns exactly the data fields, enumerable')
  const prototype = Object.getPrototypeOf(d)
  assert.deepEqual(Reflect.ownKeys(prototype).sort(), ['constructor', 'ietfHeaders', 'xRateLimitHeaders'])
  assert.equal(Object.getPrototypeOf(prototype), Object.prototype)
  return {
    allowed: d.allowed,
    limit: d.limit,
    remaining: d.remaining,
    reset_after_ns: d.resetAfterNs,
    clear_after_ns: d.clearAfterNs,
    replenish_after_ns: d.replenishAfterNs,
    window_ns: d.windowNs,
    retry_after_s: d.retryAfterS,
    x_ratelimit_headers: d.xRateLimitHeaders(),
    ietf_headers: d.ietfHeaders(policy),
  }
}

module.exports = { MS, ns, inMemoryStore, decisionForm }
