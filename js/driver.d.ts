// Types of the Promise driver (js/driver.js). Shared by the Node and the wasm package.
import type { CoreModule, NativeModule, Output, ErrorCode, FailCode, LlmRequest, RateLimitScopeName, RequestSpec, Reservation, ReservationAnswer, SharedUpdate } from './core.js'

/** Anything `send` may resolve to: a fetch `Response`, or an object with `status` and `headers`. */
export interface ResponseLike {
  status: number
  /** A fetch `Headers`, a `Map`, an array of `[name, value]` pairs or a plain object. */
  headers?: unknown
  /** fetch `Response`: the driver reads Discord's 429 JSON body from `clone()`. */
  clone?: () => { text(): Promise<string> }
  /**
   * Otherwise the body as text or as the parsed object, read when the profile reads bodies of
   * that status (a 429's `{ retry_after, global }`, GitHub's 403 messages, Shopify's GraphQL
   * `extensions.cost`), and for a request with `costs` (its `usage`).
   */
  body?: unknown
}

/** Settings of a `RateLimiter`: camelCase, durations in milliseconds. Absent: the profile's defaults. */
export interface RateLimiterOptions {
  /**
   * The header profile: `'discord'` (default), `'ietf'`, `'github'`, `'retry_after_only'`, a
   * provider pack (`'openai'`, `'anthropic'`, `'azure_openai'`, `'shopify'`), or `'auto'`
   * (the provider recognised from each answer).
   */
  profile?: 'discord' | 'ietf' | 'github' | 'retry_after_only' | 'openai' | 'anthropic' | 'azure_openai' | 'shopify' | 'auto'
  /** Requests per `globalWindow` per identity (Discord: 50); 0 turns it off. */
  globalLimit?: number
  globalWindow?: number
  globalMarginMax?: number
  /** Fail at once (MaxWaitExceededError) when the predicted wait exceeds this; null: no limit. */
  maxWait?: number | null
  /**
   * The default `deferAfter` of `run`: fail at once (DeferredError, with when to retry) when
   * the predicted wait exceeds this many ms; null: never defer.
   */
  deferAfter?: number | null
  /** Re-sends after a 429 before RetriesExhaustedError. */
  maxRateLimitRetries?: number
  /** Re-sends after a 5xx or a transport failure. */
  maxErrorRetries?: number
  backoffBase?: number
  backoffMax?: number
  minRateLimitWait?: number
  maxServerWait?: number
  invalidRequestLimit?: number
  invalidRequestWindow?: number
  invalidRequestStopAt?: number
  invalidRequestWarnAt?: number
  edgeBackoffBase?: number
  edgeBackoffMax?: number
  stopOnUnauthorized?: boolean
  jitterSeed?: number
  maxRoutes?: number
  bucketIdleTtl?: number
  /**
   * Routes known to share a bucket before any answer (lists of route keys such as
   * `PUT /channels/:id/messages/:id/reactions/:reaction`); Discord's reaction routes by
   * default, `[]` for none.
   */
  routeGroups?: string[][]
  /** The default identity (a key for the token, never the token itself). */
  identity?: string
  /**
   * Shared mode: several processes share the limits through this store (e.g. `RedisStore` of
   * `ratelane/redis`). `close()` then also flushes and closes it. null/undefined: not shared.
   */
  shared?: SharedStore | null
  onRateLimited?: (event: RateLimitedEvent) => void
  onBucketLearned?: (event: BucketLearnedEvent) => void
  onInvalidRequestWarning?: (event: InvalidRequestWarningEvent) => void
  onStoreUnavailable?: (event: StoreUnavailableEvent) => void
  onStoreRecovered?: (event: StoreRecoveredEvent) => void
}

/**
 * The store of shared mode, as the driver uses it (js/CONTRACT.md, "The driver's store
 * interface"). The rate-limit decisions are the store's and the core's; the driver only
 * carries them.
 */
export interface SharedStore {
  /** Milliseconds the driver waits for a reservation's answer before telling the core "unavailable". */
  readonly timeout: number
  /** The core's `shared` settings (JSON form: `on_unavailable`, `retry_base_ns`, ...). */
  coreSettings(): Record<string, unknown>
  /** Called once with the settings the core validated (`limiter.config.shared`, defaults filled in). */
  bind(sharedConfig: Record<string, unknown>): void
  /** Asks the store; a rejection, or no answer within `timeout`, means "unavailable". */
  reserve(reservation: Reservation): Promise<ReservationAnswer> | ReservationAnswer
  /** Writes an update, fire-and-forget, in the order given. */
  record(update: SharedUpdate): void | Promise<void>
  /** Optional: resolves once what was recorded has been written (bounded). */
  flush?(): Promise<void> | void
  /** Flushes what is left and releases the store's resources. */
  close(): Promise<void> | void
}

export interface RunOptions {
  /** Cancels the request while queued or in flight; `run` rejects with `signal.reason`. */
  signal?: AbortSignal | null
  /** Milliseconds from now: fail with DeadlineExceededError rather than send later. */
  deadline?: number | null
  /**
   * Milliseconds: when the predicted wait is longer, fail at once with DeferredError (carrying
   * `retryAt`, `retryAtMs`, `retryAtDate`) instead of waiting. With `maxWait` the shorter is the
   * budget; a `deadline` before the predicted send wins (DeadlineExceededError).
   */
  deferAfter?: number | null
  /** When set, `path` is a route template and this its major parameter. */
  major?: string | null
  identity?: string | null
  priority?: number
  /** Whether re-sending after a possibly delivered attempt is harmless (default: by method). */
  idempotent?: boolean | null
  globalExempt?: boolean | null
  /** The sub-limit class: a sub-limit 429 holds only requests of this class on the route
   * (default: derived from `bodyKeys`). */
  subLimit?: string | null
  /** The JSON body's top-level keys, or the body object itself (Discord: a channel edit of
   * `name` or `topic` is limited apart from the channel's other edits). */
  bodyKeys?: string[] | Record<string, unknown> | null
  /**
   * The request's estimated cost per dimension beyond the one request it always costs, by the
   * name the answers report (`{ tokens: 1200 }` for an LLM API's tokens per minute): it is sent
   * only when each dimension has room for it, and the `usage` of its answer's JSON body (read
   * from a clone) settles the estimate. Whole numbers >= 0 (else InvalidArgumentError); at
   * most 8 names of `[a-z0-9_]`, not `requests` (else InvalidRequestError). An estimate above
   * a dimension's whole limit rejects with InsufficientCapacityError.
   */
  costs?: Record<string, number> | null
  /**
   * The LLM model the request asks for (`readLlmRequest(body).model`): under the `openai`,
   * `azure_openai`, `anthropic` and `auto` profiles it keeps the model's queue and budgets apart
   * from other models' (unless `major` is given). 1 to 256 bytes (else InvalidRequestError).
   */
  model?: string | null
}

export interface SendContext {
  /** Aborted when the caller cancels; pass it to `fetch`. */
  signal: AbortSignal | undefined
  /** 1 for the first send, 2 for the first retry, ... */
  attempt: number
}

export interface RateLimitedEvent {
  id: number
  method: string | undefined
  path: string | undefined
  scope: RateLimitScopeName
  /** How long the affected requests are held, in ms. */
  retryAfter: number
}
export interface BucketLearnedEvent { route: string; bucket: string }
export interface InvalidRequestWarningEvent { count: number; limit: number }
/** Shared mode: the store did not answer for request `id`; the core asks it again from `retryAt`. */
export interface StoreUnavailableEvent {
  id: number
  /** When the core will ask the store again, in ms on the `performance.now()` clock. */
  retryAt: number
}
/** Shared mode: the store answers again after being unavailable. */
export interface StoreRecoveredEvent {}
export interface RateLimiterEvents {
  rateLimited: RateLimitedEvent
  bucketLearned: BucketLearnedEvent
  invalidRequestWarning: InvalidRequestWarningEvent
  storeUnavailable: StoreUnavailableEvent
  storeRecovered: StoreRecoveredEvent
}

export declare class RatelaneError extends Error {
  readonly code: string
}
export declare class UsageError extends RatelaneError {
  readonly code: ErrorCode
}
export declare class UnknownRequestError extends UsageError {}
export declare class InvalidStateError extends UsageError {}
export declare class InvalidConfigError extends UsageError {}
export declare class InvalidRequestError extends UsageError {}
export declare class LimiterClosedError extends UsageError {}
/** `restore` on a limiter that holds requests (`limiter_busy`). */
export declare class LimiterBusyError extends UsageError {}
/** A snapshot `restore` refuses. */
export declare class SnapshotError extends UsageError {}
/** `snapshot_foreign`: not a ratelane snapshot, or one of another header profile. */
export declare class SnapshotForeignError extends SnapshotError {}
/** `snapshot_version`: written by a newer ratelane. */
export declare class SnapshotVersionError extends SnapshotError {}
/** `snapshot_malformed`: missing or unknown keys, wrong types, values out of range. */
export declare class SnapshotMalformedError extends SnapshotError {}
export declare class InvalidArgumentError extends UsageError {}
export declare class SimulationContractError extends RatelaneError {}

export declare class RateLimitError extends RatelaneError {
  readonly code: FailCode
  readonly method: string
  readonly path: string
  readonly attempts: number | null
  /** The last response received for the request (e.g. the last 429), if any. */
  readonly response: ResponseLike | null
}
export declare class DeadlineExceededError extends RateLimitError {
  /** The predicted send time in ms on the `performance.now()` clock, or null. */
  readonly predictedSendAt: number | null
  /** The predicted wait from the moment it failed, in ms, or null. */
  readonly predictedWait: number | null
}
export declare class MaxWaitExceededError extends RateLimitError {
  /** The predicted wait before sending, in ms. */
  readonly predictedWait: number
}
/** The predicted wait exceeded `deferAfter`: run the request again at `retryAt`. */
export declare class DeferredError extends RateLimitError {
  /** The predicted send time in ms on the `performance.now()` clock. */
  readonly retryAt: number
  /** The same moment in whole ms since the Unix epoch, rounded up (the wall clock, for a job queue's delay). */
  readonly retryAtMs: number
  /** The same moment as a Date. */
  readonly retryAtDate: Date
  /** Ms from the moment it failed until then. */
  readonly retryAfter: number
}
/**
 * A cost above a whole budget, which can never be admitted: a request whose estimated cost in
 * a dimension (`costs`) is above the limit the server reports for it; or a server-side
 * `checkN` weight above the burst (`fromCoreError` of an `insufficient_capacity` error:
 * `dimension` null, `requested`/`capacity` the same numbers as `cost`/`limit`).
 */
export declare class InsufficientCapacityError extends RateLimitError {
  readonly code: 'insufficient_capacity'
  /** The dimension (`tokens`, ...); null for a server-side `checkN`. */
  readonly dimension: string | null
  /** The request's estimated cost in it (the weight asked for). */
  readonly cost: number
  /** The dimension's whole limit, as the server reported it (the burst). */
  readonly limit: number
  /** `cost`, by the server-side name. */
  readonly requested: number
  /** `limit`, by the server-side name. */
  readonly capacity: number
}
export declare class RetriesExhaustedError extends RateLimitError {}
export declare class MaybeSentError extends RateLimitError {}
export declare class NetworkError extends RateLimitError {}
export declare class UnauthorizedError extends RateLimitError {}
export declare class ClosedError extends RateLimitError {}

export declare class RateLimiter {
  constructor(options?: RateLimiterOptions)
  run<R extends ResponseLike>(
    method: string,
    path: string | { pathname: string; search?: string },
    send: (context: SendContext) => R | Promise<R>,
    options?: RunOptions,
  ): Promise<R>
  /**
   * Rejects queued requests with ClosedError; resolves once those in flight settled (and, in
   * shared mode, the store's reservations were answered and the store flushed and closed).
   */
  close(): Promise<void>
  /**
   * What the limiter learned, as JSON text to keep across a restart (format
   * "ratelane.snapshot"; instants on the wall clock, `Date.now()`).
   */
  snapshot(): string
  /**
   * Restores `snapshot()` text before the first request. Throws SnapshotForeignError,
   * SnapshotVersionError, SnapshotMalformedError, LimiterBusyError, LimiterClosedError,
   * InvalidArgumentError.
   */
  restore(snapshot: string): void
  /** The predicted wait before a request enqueued now would be sent, in ms. */
  predictWait(method: string, path: string, options?: RunOptions): number
  readonly queued: number
  readonly inFlight: number
  readonly closed: boolean
  /** The core configuration in use (JSON form: snake_case, ns). */
  readonly config: Record<string, unknown>
  on<K extends keyof RateLimiterEvents>(event: K, listener: (event: RateLimiterEvents[K]) => void): this
  once<K extends keyof RateLimiterEvents>(event: K, listener: (event: RateLimiterEvents[K]) => void): this
  off<K extends keyof RateLimiterEvents>(event: K, listener: (event: RateLimiterEvents[K]) => void): this
  listenerCount(event: keyof RateLimiterEvents): number
}

/** What `createRatelane` returns: the driver, the error classes and the core's own classes. */
export interface Ratelane<C extends NativeModule = NativeModule> {
  RateLimiter: typeof RateLimiter
  RatelaneError: typeof RatelaneError
  UsageError: typeof UsageError
  UnknownRequestError: typeof UnknownRequestError
  InvalidStateError: typeof InvalidStateError
  InvalidConfigError: typeof InvalidConfigError
  InvalidRequestError: typeof InvalidRequestError
  LimiterClosedError: typeof LimiterClosedError
  LimiterBusyError: typeof LimiterBusyError
  SnapshotError: typeof SnapshotError
  SnapshotForeignError: typeof SnapshotForeignError
  SnapshotVersionError: typeof SnapshotVersionError
  SnapshotMalformedError: typeof SnapshotMalformedError
  InvalidArgumentError: typeof InvalidArgumentError
  SimulationContractError: typeof SimulationContractError
  InsufficientCapacityError: typeof InsufficientCapacityError
  RateLimitError: typeof RateLimitError
  DeadlineExceededError: typeof DeadlineExceededError
  MaxWaitExceededError: typeof MaxWaitExceededError
  DeferredError: typeof DeferredError
  RetriesExhaustedError: typeof RetriesExhaustedError
  MaybeSentError: typeof MaybeSentError
  NetworkError: typeof NetworkError
  UnauthorizedError: typeof UnauthorizedError
  ClosedError: typeof ClosedError
  FAIL_CLASSES: Readonly<Record<FailCode, typeof RateLimitError>>
  USAGE_CLASSES: Readonly<Record<ErrorCode, typeof RatelaneError>>
  /** The matching ratelane class for an error the core threw (anything else unchanged). */
  fromCoreError(error: unknown): unknown
  /** RateLimiter options as the core's JSON configuration (throws InvalidConfigError). */
  toCoreConfig(options?: RateLimiterOptions): Record<string, unknown>
  /** `'not_sent'` when an error proves nothing reached the server, else `'maybe_sent'`. */
  classifyFailure(error: unknown): 'not_sent' | 'maybe_sent'
  headerPairs(headers: unknown): Array<[string, string]>
  Metrics: typeof Metrics
  instrument: typeof instrument
  /** The object API over the core module's positional `Limiter` (js/CONTRACT.md). */
  Limiter: CoreModule['Limiter']
  SimServer: CoreModule['SimServer']
  Simulation: CoreModule['Simulation']
  /** A held output (`takeHeld()`'s JSON text) as the contract's `Output` object. */
  outputObject(text: string): Output
  GcraStore: C['GcraStore']
  LeakyBucketStore: C['LeakyBucketStore']
  FixedWindowStore: C['FixedWindowStore']
  FAIL_CODES: C['FAIL_CODES']
  ERROR_CODES: C['ERROR_CODES']
  /**
   * The model and estimated tokens of an OpenAI (chat completions, completions, responses,
   * embeddings) or Anthropic (messages) request body; null for a body that is not such JSON.
   * Throws InvalidArgumentError for a body that is neither a string nor a Uint8Array.
   */
  readLlmRequest(body: string | Uint8Array): LlmRequest | null
}

/**
 * The part of an OpenTelemetry `Meter` (`@opentelemetry/api`, an optional peer dependency)
 * that ratelane uses; `metrics.getMeter('ratelane')` is one.
 */
export interface MeterLike {
  createCounter(name: string, options?: object): { add(value: number, attributes?: object): void }
  createHistogram(name: string, options?: object): { record(value: number, attributes?: object): void }
  createObservableGauge(name: string, options?: object): {
    addCallback(callback: (result: { observe(value: number, attributes?: object): void }) => void): void
  }
}

/** Options of `Metrics.attach` and `instrument`. */
export interface AttachOptions {
  /** Adds the attribute `ratelane.limiter` with this value to every instrument. */
  name?: string
}

/**
 * The ratelane instruments on one Meter (README, "Metrics"): `ratelane.requests`
 * (`ratelane.outcome`, `error.type`), `ratelane.wait.duration` (s), `ratelane.queue.depth`,
 * `ratelane.requests.in_flight`, `ratelane.rate_limited` (`ratelane.scope`),
 * `ratelane.invalid_requests.used`, `ratelane.store.unavailable`, `ratelane.store.recovered`.
 */
export declare class Metrics {
  /** Throws InvalidArgumentError when `meter` is not a Meter. */
  constructor(meter: MeterLike)
  /** Records the limiter's decisions from now on (attach before its first request). */
  attach(limiter: RateLimiter, options?: AttachOptions): this
  /** Stops recording the limiter. */
  detach(limiter: RateLimiter): this
}

/** `new Metrics(meter).attach(limiter, options)`. */
export declare function instrument(limiter: RateLimiter, meter: MeterLike, options?: AttachOptions): Metrics

export declare function createRatelane<C extends NativeModule>(core: C): Ratelane<C>
