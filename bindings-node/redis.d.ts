// Types of `require('ratelane/redis')` (redis.js): RedisStore (redis_store.d.ts), and the
// server-side limiters (redis_limiters.js) evaluated atomically in Redis. Written by hand;
// test/typed.ts type-checks them against node-redis's own client types.
import type { ServerDecision } from './core'
import type { RatelaneError } from './driver'

/**
 * What the limiters need of a client: node-redis's `evalSha` and `eval` (a `createClient()`
 * or `createCluster()` client of npm `redis`, connected; the limiters never close it).
 */
export interface RedisScriptClient {
  evalSha(sha1: string, options: { keys: string[]; arguments: string[] }): Promise<unknown>
  eval(script: string, options: { keys: string[]; arguments: string[] }): Promise<unknown>
}

/** Every limiter's options. */
export interface RedisLimiterOptions {
  /** Starts every key (`prefix + key`): one prefix per limiter. Required. */
  prefix: string
  /** Keys live at least this long (for replays in virtual time); default 0. */
  minTtlMs?: number | null
}

/** A check's options. */
export interface CheckOptions {
  /**
   * Integer nanoseconds replacing Redis's clock (`TIME`), for replaying fixed timestamps in
   * tests; every caller of a key must then use the same clock.
   */
  nowNs?: number | bigint | null
}

/** A booking in Redis (`RedisFixedWindow.schedule`). */
export interface RedisScheduled {
  /** The job may start now (`releaseAtNs` is then `nowNs`). */
  runNow: boolean
  /** When the job may start, on the script's clock (Redis's: Unix nanoseconds). */
  releaseAtNs: bigint
  /** Jobs waiting ahead of and including this one (0 when it runs now). */
  waiting: number
  /** The clock the script used: Redis's `TIME` in Unix nanoseconds, or the `nowNs` given. */
  nowNs: bigint
  /** `releaseAtNs - nowNs`: how long to wait, whatever the local clock says. */
  delayNs: number
}

declare abstract class RedisLimiter {
  /** The client every check goes through (the caller's, left open). */
  readonly client: RedisScriptClient
  /** Every key is `prefix + key`. */
  readonly prefix: string
  /** Keys live at least this long, in milliseconds. */
  readonly minTtlMs: number
}

/** GCRA per key in Redis: the same answers as `GcraStore`, shared by every process. */
export declare class RedisGcra extends RedisLimiter {
  /** One request per `intervalNs`, `burst` back to back. Throws `InvalidConfigError`. */
  constructor(client: RedisScriptClient, intervalNs: number, burst: number, options: RedisLimiterOptions)
  /** `quota` requests per `windowNs`, all allowed back to back. */
  static perWindow(client: RedisScriptClient, quota: number, windowNs: number, options: RedisLimiterOptions): RedisGcra
  readonly intervalNs: number
  readonly burst: number
  /** `burst × intervalNs`. */
  readonly windowNs: number
  /** Checks one request for `key`, and counts it if admitted. */
  check(key: string, options?: CheckOptions | null): Promise<ServerDecision>
  /** A request of weight `n` (0 peeks); rejects with `InsufficientCapacityError` above the burst. */
  checkN(key: string, n: number, options?: CheckOptions | null): Promise<ServerDecision>
}

/** `RedisLeakyBucket`'s options. */
export interface RedisLeakyBucketOptions extends RedisLimiterOptions {
  /** Requests drained per drip (default 1). */
  dripSize?: number | null
  /** At most one request per this many nanoseconds. */
  minIntervalNs?: number | null
}

/** A legacy Misskey/Sharkey limit, with the limiter's options. */
export interface RedisLegacyLimit extends RedisLimiterOptions {
  max?: number | null
  durationNs?: number | null
  minIntervalNs?: number | null
}

/** A leaky bucket per key in Redis: the same answers as `LeakyBucketStore`. */
export declare class RedisLeakyBucket extends RedisLimiter {
  constructor(client: RedisScriptClient, size: number, dripRateNs: number, options: RedisLeakyBucketOptions)
  /** From a legacy `{ max, durationNs, minIntervalNs }` limit, translated by the core. */
  static fromLegacy(client: RedisScriptClient, limit: RedisLegacyLimit): RedisLeakyBucket
  readonly size: number
  readonly dripRateNs: number
  readonly dripSize: number
  readonly minIntervalNs: number | null
  /** The time a full bucket takes to drain. */
  readonly windowNs: number
  check(key: string, options?: CheckOptions | null): Promise<ServerDecision>
  /** `check` with the bucket scaled by `factor` in (0, 1] for this subject. */
  checkScaled(key: string, factor: number, options?: CheckOptions | null): Promise<ServerDecision>
}

/** A fixed window per key (a group) in Redis: the same answers as `FixedWindowStore`. */
export declare class RedisFixedWindow extends RedisLimiter {
  constructor(client: RedisScriptClient, quota: number, windowNs: number, options: RedisLimiterOptions)
  readonly quota: number
  readonly windowNs: number
  check(key: string, options?: CheckOptions | null): Promise<ServerDecision>
  /**
   * Books a slot for one job of group `key`; rejects with `OutOfRangeError` beyond 2^52 ns from
   * now, with `InvalidRequestError` for a release after 2^64 - 1 ns.
   */
  schedule(key: string, options?: CheckOptions | null): Promise<RedisScheduled>
  /** Records that one delayed job of `key` was released (or dropped); false if none waits. */
  release(key: string, options?: CheckOptions | null): Promise<boolean>
}

/** The codes of `RedisLimiterError`s (`ratelane_redis::Error`). */
export type RedisErrorCode = 'redis_connection' | 'redis_server' | 'redis_bad_state' | 'out_of_range' | 'redis_bad_reply'

/** A Redis-backed check could not decide; `cause` holds node-redis's error, if any. */
export declare class RedisLimiterError extends RatelaneError {
  readonly code: RedisErrorCode
}
export declare class RedisConnectionError extends RedisLimiterError {
  readonly code: 'redis_connection'
}
export declare class RedisServerError extends RedisLimiterError {
  readonly code: 'redis_server'
}
export declare class RedisBadStateError extends RedisLimiterError {
  readonly code: 'redis_bad_state'
}
export declare class OutOfRangeError extends RedisLimiterError {
  readonly code: 'out_of_range'
}
export declare class RedisBadReplyError extends RedisLimiterError {
  readonly code: 'redis_bad_reply'
}

export declare const REDIS_ERROR_CLASSES: Readonly<Record<RedisErrorCode, typeof RedisLimiterError>>
/** Every code a limiter of this module throws or rejects with (`ratelane_redis::Error::ALL_CODES`). */
export declare const REDIS_ERROR_CODES: readonly string[]
/** The texts of `redis/scripts/*.lua`, embedded in the addon at build time. */
export declare const GCRA_LUA: string
export declare const LEAKY_BUCKET_LUA: string
export declare const FIXED_WINDOW_LUA: string

export * from './redis_store'
