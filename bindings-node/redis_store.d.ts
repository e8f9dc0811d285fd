// Types of redis_store.js (re-exported by `require('ratelane/redis')`): the Redis store of the driver's shared mode.
// Needs the `redis` package (node-redis), an optional peer dependency.
import type { Reservation, ReservationAnswer, SharedUpdate } from './core'
import type { SharedStore } from './driver'

/**
 * What RedisStore needs of a node-redis client (`createClient()` of the `redis` package; a
 * cluster client of `createCluster()` is not supported: its `sendCommand` differs).
 */
export interface RedisClientLike {
  sendCommand(args: ReadonlyArray<string>): Promise<unknown>
  readonly isReady?: boolean
}

/** RedisStore options: camelCase, durations in milliseconds. */
export interface RedisStoreOptions {
  /** Every key starts with it; the same in every process of one bot, with a Cluster hash tag. Default `'{ratelane}:'`. */
  prefix?: string
  /** ms to wait for a reservation's answer before the core hears "unavailable". Default 250. */
  timeout?: number
  /** What the core does while Redis does not answer. Default `'fail_open'`. */
  onUnavailable?: 'fail_open' | 'fail_closed'
  /** How long a grant holds a slot without a report (default 30 000). Same in every process. */
  lease?: number
  /** How often a request waiting for another process's pioneer asks again (default 50). Same in every process. */
  pioneerPoll?: number
  /** How long idle state lives in Redis (default 600 000). Same in every process. */
  stateTtl?: number
  /** First pause before the core asks an unavailable store again (default 100), doubling up to `retryMax` (default 5000). */
  retryBase?: number
  retryMax?: number
  /** This process's name in the store (default: a random UUID). */
  clientName?: string
  /** Lease the global budget (default true): one reservation takes the global tokens this
   * process's ready requests need; the others spend them instead of each asking the window. */
  globalLease?: boolean
}

/**
 * The shared store in Redis, for `new RateLimiter({ shared: new RedisStore(url) })`. Runs the
 * store script redis/scripts/shared_store.lua (shipped as shared_store.lua). Redis failures
 * never throw: reservations are then "unavailable" to the core, updates are dropped.
 */
export declare class RedisStore implements SharedStore {
  /**
   * @param clientOrUrl a node-redis client (connected by you, with an 'error' listener; left
   *   open by `close()`), or a `redis://` URL for a client the store creates and closes.
   * @throws InvalidConfigError (`code` 'invalid_config') for bad options.
   */
  constructor(clientOrUrl: string | RedisClientLike, options?: RedisStoreOptions)
  readonly prefix: string
  readonly timeout: number
  readonly clientName: string
  /** Updates dropped because Redis could not take them. */
  readonly dropped: number
  /** The last error the client or Redis reported, or null (for logs). */
  readonly lastError: unknown
  coreSettings(): Record<string, unknown>
  bind(sharedConfig: Record<string, unknown>): void
  reserve(reservation: Reservation): Promise<ReservationAnswer>
  record(update: SharedUpdate): void
  /** Resolves once every queued call was answered or dropped, or after `timeout` ms (default 4 x the store's). */
  flush(timeout?: number): Promise<void>
  /** Sends what is queued (bounded), stops, and closes the client if the store created it. Idempotent. */
  close(): Promise<void>
}

/** The store script's ARGV for a reservation, after the common part. */
export declare function reserveArgs(reservation: Reservation): string[]
/** The store script's ARGV for an update, after the common part. */
export declare function recordArgs(update: SharedUpdate): string[]
/** The store script's reply to a reservation as an answer for the core (throws on anything else). */
export declare function parseAnswer(reply: unknown): ReservationAnswer
/** The text of redis/scripts/shared_store.lua. */
export declare const SHARED_STORE_LUA: string
