// The core surface both JavaScript packages expose (js/CONTRACT.md), as TypeScript types.
// `ratelane` (napi) and `ratelane-wasm` (wasm-bindgen) must both satisfy `CoreModule`; each
// package's tests type-check that (see js/README.md). Times here are integer nanoseconds.

/** A request as the core takes it. */
export interface RequestSpec {
  method: string
  /** The concrete path (`/channels/123/messages`), or a route template when `major` is set. */
  path: string
  /** When set, `path` is a route template and this is its major parameter. */
  major?: string | null
  /** A key for the token (never the token itself). Default `""`. */
  identity?: string | null
  /** Monotonic deadline in ns, same clock as `nowNs`. */
  deadlineNs?: number | null
  /**
   * A budget in ns: when the predicted wait is longer, fail at once with `deferred` (and
   * `retryAtNs`) instead of waiting. Default: the config's `defer_after_ns`, else none.
   */
  deferAfterNs?: number | null
  /** i32; higher goes first for the global budget. Default 0. */
  priority?: number | null
  idempotent?: boolean | null
  globalExempt?: boolean | null
  /** The sub-limit class: a sub-limit 429 holds only requests of this class on the route.
   * Default: derived by the profile from `bodyKeys`. */
  subLimit?: string | null
  /** The top-level keys of the JSON body (Discord: `name`/`topic` on a channel edit). */
  bodyKeys?: string[] | null
  /**
   * The request's estimated cost per dimension beyond the one request it always costs, by the
   * name the answers report (`{ tokens: 1200 }`; `input_tokens`, `points`...): it is sent
   * only when each dimension has room for it, and its answer's body `usage` settles it. Whole
   * numbers >= 0; at most 8 names of 1 to 32 bytes of `[a-z0-9_]`, not `requests`.
   */
  costs?: Record<string, number> | null
  /**
   * The LLM model it asks for (`readLlmRequest(body).model`): under the `openai`,
   * `azure_openai`, `anthropic` and `auto` profiles, whose providers limit per model, it keeps
   * the model's queue and budgets apart from other models' (unless `major` is given). 1 to 256
   * bytes.
   */
  model?: string | null
}

/** What `readLlmRequest` read from an LLM API request body (`ratelane::llm::LlmRequest`). */
export interface LlmRequest {
  /** The body's `model`, or null. */
  model: string | null
  /**
   * The estimated tokens: the prompt's characters / 4 (rounded up) plus the completion budget
   * the body asks for (`max_completion_tokens`, `max_tokens`, `max_output_tokens`; 1024 when
   * none, 16 for a legacy completion, 0 for an embedding).
   */
  tokens: number
}

/** Shopify's GraphQL query cost (`extensions.cost`); each field a finite number or null. */
export interface QueryCost {
  /** `requestedQueryCost` */
  requested?: number | null
  /** `actualQueryCost` (null when the query was throttled) */
  actual?: number | null
  /** `throttleStatus.maximumAvailable` */
  maximumAvailable?: number | null
  /** `throttleStatus.currentlyAvailable` */
  currentlyAvailable?: number | null
  /** `throttleStatus.restoreRate` (points per second) */
  restoreRate?: number | null
}

/**
 * Fields a driver parsed from a response body (when `readsBody(status)` says the profile reads
 * it): Discord's `retry_after`/`global`, a GraphQL `extensions.cost`, and `errors`: the error
 * codes and messages at fixed places (js/CONTRACT.md, "Body hints").
 */
export interface BodyHints {
  retryAfter?: number | null
  global?: boolean | null
  cost?: QueryCost | null
  errors?: string[] | null
  /**
   * The numeric fields of the body's top-level `usage` object (OpenAI `total_tokens`,
   * `prompt_tokens`, `completion_tokens`; Anthropic `input_tokens`, `output_tokens`): what a
   * request with `costs` actually cost. At most 16; values that are not finite numbers >= 0
   * are left out.
   */
  usage?: Record<string, number> | null
}

/** A response as the driver received it. */
export interface ResponseSpec {
  status: number
  /** In the order received; repeated names allowed. */
  headers: Array<[string, string]>
  body?: BodyHints | null
  /** `Date.now()` at receipt. */
  wallClockMs?: number | null
}

export type Disposition = 'complete' | 'retry' | 'failed'
export type TransportFailure = 'not_sent' | 'maybe_sent'

/** Codes of `fail` outputs (`FAIL_CODES`). */
export type FailCode =
  | 'deadline_exceeded'
  | 'max_wait_exceeded'
  | 'deferred'
  | 'retries_exhausted'
  | 'maybe_sent'
  | 'network_error'
  | 'unauthorized'
  | 'closed'
  | 'insufficient_capacity'

/**
 * Codes of thrown errors: the core's misuse codes (`ERROR_CODES`), `invalid_argument` from the
 * binding, and `simulation_contract` from `Simulation.run`.
 */
export type ErrorCode =
  | 'unknown_request'
  | 'invalid_state'
  | 'invalid_config'
  | 'invalid_request'
  | 'limiter_closed'
  | 'limiter_busy'
  | 'snapshot_foreign'
  | 'snapshot_version'
  | 'snapshot_malformed'
  | 'invalid_argument'
  | 'simulation_contract'

export type RateLimitScopeName = 'bucket' | 'global' | 'shared' | 'sub_limit' | 'edge'

/** What a shared-mode denial or hold concerns (`ratelane::shared::SharedScope`). */
export type SharedScopeName = 'edge' | 'invalid' | 'global' | 'route' | 'bucket' | 'pioneer'

/** Shared mode: what the store must decide before request `id` may be sent. */
export interface Reservation {
  id: number
  identity: string
  route: string
  major: string
  /** The bucket hash this process learned for the route, or null. */
  bucket: string | null
  countsGlobal: boolean
  globalLimit: number
  /** Global tokens asked for, this request's included: the store leases the others. */
  globalWant: number
  globalWindowNs: number
  marginNs: number
  invalidLimit: number
  invalidWindowNs: number
  /** After a store outage: count only the processes back within this long, or null. */
  processesSinceNs: number | null
  /** After a store outage: this process still has sends the store may not count. */
  reporting: boolean
  /** After a store outage: how long ago the sends made without a reservation were made. */
  unrecordedNs: number[]
  /** After a store outage: how long ago the sends the store granted were made. */
  grantedNs: number[]
}

/** Shared mode: what the store must record (fire-and-forget, in order). */
export type SharedUpdate =
  | {
      kind: 'bucket'
      id: number
      identity: string
      route: string
      major: string
      bucket: string | null
      unlimited: boolean
      limit: number | null
      remaining: number | null
      resetAfterNs: number | null
      windowNs: number | null
    }
  | {
      kind: 'release'
      id: number
      identity: string
      route: string
      major: string
      bucket: string | null
      reached: boolean
      windowNs: number | null
    }
  | {
      kind: 'hold'
      scope: SharedScopeName
      identity: string
      route: string
      major: string
      bucket: string | null
      retryAfterNs: number
    }
  | { kind: 'invalid'; id: number; windowNs: number }

/** Shared mode: the store's answer, for `handleReservation`. `processes`: the live processes
 * the store counted (a fail-open limiter runs on its share of the limits while the store is
 * down); `leased`: global tokens the store leased beyond the request's own; `storeTimeUs`: the
 * store's clock when it granted, in microseconds (only differences are used: the limiter
 * learns how unevenly its requests leave after their grants, for the margin it passes). */
export type ReservationAnswer =
  | { answer: 'granted'; processes?: number; leased?: number; storeTimeUs?: number }
  | { answer: 'denied'; retryAfterNs: number; scope: SharedScopeName; processes?: number }
  | { answer: 'unavailable' }

export type Output =
  | { type: 'send'; id: number }
  | {
      type: 'fail'
      id: number
      code: FailCode
      message: string
      /** deadline_exceeded: the predicted send time (ns), or null when unknown. */
      predictedSendAtNs?: number | null
      /** max_wait_exceeded: the predicted wait (ns). */
      predictedWaitNs?: number
      /** deferred: the predicted send time (ns, same clock as `nowNs`): when to enqueue it again. */
      retryAtNs?: number
      /** retries_exhausted, network_error. */
      attempts?: number
      /** insufficient_capacity: the dimension whose limit the estimate is above (`tokens`...). */
      dimension?: string
      /** insufficient_capacity: the request's estimated cost in that dimension. */
      cost?: number
      /** insufficient_capacity: the dimension's limit, as the server reported it. */
      limit?: number
    }
  | { type: 'rate_limited'; id: number; scope: RateLimitScopeName; retryAfterNs: number }
  | { type: 'bucket_learned'; route: string; bucket: string }
  | { type: 'invalid_request_warning'; count: number; limit: number }
  | { type: 'reserve'; id: number; reservation: Reservation }
  | { type: 'share'; update: SharedUpdate }
  | { type: 'store_unavailable'; id: number; retryAtNs: number }
  | { type: 'store_recovered' }
  | { type: 'wait_until'; atNs: number }
  | { type: 'idle' }

/** A response of the simulated Discord server. */
export interface SimResponseSpec {
  status: number
  headers: Array<[string, string]>
  /** `usage`: what an accepted request cost, on a server with a token budget (`tokens`). */
  body: { retryAfter: number | null; global: boolean | null; usage?: Record<string, number> }
  bodyText: string
}

/** `ratelane::json::report_to_json`, parsed. */
export interface SimReport {
  stop: 'finished' | 'stalled' | 'max_time' | 'max_steps'
  now_ns: number
  steps: number
  succeeded: number
  cancelled: number
  failed: Record<string, number>
  unfinished: number
  count_429: number
  total_sends: number
  makespan_ns: number
  known_limit_violations: number
  fifo_violations: number
  deadline_violations: number
  sends_after_close: number
  max_global_in_window: Record<string, number>
  global_limit: { limit: number; window_ns: number; kind: 'fixed' | 'sliding' | 'refill' } | null
  requests: Array<{
    outcome:
      | { kind: 'completed'; status: number }
      | { kind: 'failed'; code: FailCode }
      | { kind: 'cancelled' }
      | { kind: 'rejected'; code: string }
      | null
    sends: number[]
    enqueued_at_ns: number | null
    finished_at_ns: number | null
  }>
  trace: string[]
}

/** What both forms of the engine have: the inputs without objects and the reads. */
export interface LimiterReads {
  handleFailure(nowNs: number, id: number, failure: TransportFailure): Disposition
  handleWritten(nowNs: number, id: number): void
  cancel(nowNs: number, id: number): void
  handleTimeout(nowNs: number): void
  close(nowNs: number): void
  readonly queued: number
  readonly inFlight: number
  /** Shared mode: requests waiting for their reservation's answer. */
  readonly reserving: number
  /** The invalid-request budget used at `nowNs`: 401/403/non-shared 429 answers within the window. A read. */
  invalidRequests(nowNs: number): number
  readonly buckets: number
  readonly isClosed: boolean
  /** Whether the profile reads the body of an answer with this status (pass `response.body` then). */
  readsBody(status: number): boolean
  configJson(): string
  /** What the limiter learned, as snapshot JSON text; `wallClockMs` is the wall clock at `nowNs`. */
  snapshot(nowNs: number, wallClockMs: number): string
  /** Restores snapshot JSON text (an input: drain afterwards). */
  restore(nowNs: number, wallClockMs: number, snapshot: string): void
}

/**
 * The sans-IO engine, one to one with `ratelane::Limiter`: the object API (js/CONTRACT.md,
 * `Limiter`), written once in js/driver.js over the core module's `NativeLimiter`.
 */
export interface CoreLimiter extends LimiterReads {
  enqueue(nowNs: number, request: RequestSpec): number
  handleResponse(nowNs: number, id: number, response: ResponseSpec): Disposition
  /** Shared mode: the store's answer to the `reserve` output of request `id`. */
  handleReservation(nowNs: number, id: number, answer: ReservationAnswer): void
  pollOutput(): Output
  drain(): Output[]
  predict(nowNs: number, request: RequestSpec): number
}

/** The core module's engine: the positional surface (js/CONTRACT.md, "The positional surface"). */
export interface NativeLimiter extends LimiterReads {
  /**
   * `enqueue` with the `RequestSpec`'s fields as arguments in its order, costs as names and
   * amounts (js/CONTRACT.md, "The positional surface"): what the driver calls.
   */
  enqueueParts(
    nowNs: number,
    method: string,
    path: string,
    identity?: string | null,
    major?: string | null,
    deadlineNs?: number | null,
    deferAfterNs?: number | null,
    priority?: number | null,
    idempotent?: boolean | null,
    globalExempt?: boolean | null,
    subLimit?: string | null,
    bodyKeys?: string[] | null,
    costNames?: string[] | null,
    costAmounts?: number[] | null,
    model?: string | null,
  ): number
  /**
   * `handleResponse` with the headers as `"name\nvalue\nname\nvalue"` (`""`: none) or a flat
   * `[name, value, ...]` list, the body hints as arguments (`cost`: its five numbers in order).
   */
  respond(
    nowNs: number,
    id: number,
    status: number,
    headers: string | string[],
    wallClockMs?: number | null,
    retryAfter?: number | null,
    global?: boolean | null,
    cost?: Array<number | null> | null,
    errors?: string[] | null,
    usageNames?: string[] | null,
    usageValues?: number[] | null,
  ): Disposition
  /** `handleReservation` with the answer's fields as arguments. */
  answerReservation(
    nowNs: number,
    id: number,
    answer: 'granted' | 'denied' | 'unavailable',
    processes?: number | null,
    leased?: number | null,
    storeTimeUs?: number | null,
    retryAfterNs?: number | null,
    scope?: string | null,
  ): void
  /**
   * `drain()` as `[kind, value, ...]` pairs: 0 send (id), 1 wait_until (atNs), 2 idle, 3 an
   * output is held: take it with `takeHeld()` and drain again. An Array (napi) or a
   * Float64Array (wasm).
   */
  drainPacked(one?: boolean | null): ArrayLike<number>
  /**
   * `drainPacked` written into `buf` (at least 2 numbers): returns how many numbers it wrote.
   * When `buf` fills before a pair of kind 1, 2 or 3, the last pair written is a `send`: call
   * again. The driver's drain (no list is made per call).
   */
  drainInto(buf: Float64Array, one?: boolean | null): number
  /** The held output as JSON text: `{"output": <the core's serde form>, "message"?: string}`. */
  takeHeld(): string | null | undefined
  /** `predict` with the `RequestSpec`'s fields in one array, in `enqueueParts`'s order. */
  predictParts(nowNs: number, parts: RequestParts): number

}

export interface CoreSimServer {
  /** `tokens`: what the request really costs of the token budget (default: the config's `tokens.cost`). */
  handle(nowNs: number, request: RequestSpec, tokens?: number | null): SimResponseSpec
  count429(): number
}

export interface CoreSimulation {
  enqueueAt(atNs: number, request: RequestSpec): number
  cancelAt(atNs: number, ticket: number): void
  closeAt(atNs: number): void
  run(): SimReport
}

/** `enqueueParts`'s arguments after the method and path. */
export type RequestRest = [
  identity?: string | null,
  major?: string | null,
  deadlineNs?: number | null,
  deferAfterNs?: number | null,
  priority?: number | null,
  idempotent?: boolean | null,
  globalExempt?: boolean | null,
  subLimit?: string | null,
  bodyKeys?: string[] | null,
  costNames?: string[] | null,
  costAmounts?: number[] | null,
  model?: string | null,
]

/**
 * `enqueueParts`'s arguments after the time as one array, every place present (absent fields
 * `undefined` or `null`): how `predictParts`, `handleParts` and `enqueueAtParts` take a request.
 */
export type RequestParts = [
  method: string,
  path: string,
  identity: string | null | undefined,
  major: string | null | undefined,
  deadlineNs: number | null | undefined,
  deferAfterNs: number | null | undefined,
  priority: number | null | undefined,
  idempotent: boolean | null | undefined,
  globalExempt: boolean | null | undefined,
  subLimit: string | null | undefined,
  bodyKeys: string[] | null | undefined,
  costNames: string[] | null | undefined,
  costAmounts: number[] | null | undefined,
  model: string | null | undefined,
]

/** The core module's simulated server: requests as `RequestParts`. */
export interface NativeSimServer {
  handleParts(nowNs: number, tokens: number | null | undefined, parts: RequestParts): SimResponseSpec
  count429(): number
}

/** The core module's simulation: requests as `RequestParts`. */
export interface NativeSimulation {
  enqueueAtParts(atNs: number, parts: RequestParts): number
  cancelAt(atNs: number, ticket: number): void
  closeAt(atNs: number): void
  run(): SimReport
}

// ------------------------------------------------------------------ server side (ratelane::server)

/**
 * What a server-side check decided for one key (`ratelane::server::Decision`): its own
 * enumerable properties are the data below; the two header methods are on its prototype and
 * rendered by the core from those fields.
 */
export interface ServerDecision {
  /** The request was admitted (and counted); false: blocked (and not counted). */
  allowed: boolean
  /** The policy's quota: the GCRA burst, the (scaled) bucket size, the requests per window. */
  limit: number
  /** Requests that could be admitted right now, one after another, after this decision. */
  remaining: number
  /** Until the next request is allowed (ns); never 0 when blocked. */
  resetAfterNs: number
  /** Until the key is back to empty (ns). */
  clearAfterNs: number
  /** Until `remaining` next grows (ns), or null when nothing is used. */
  replenishAfterNs: number | null
  /** The time a full quota takes to come back (ns); the IETF policy's `w`. */
  windowNs: number
  /** `Retry-After` in whole seconds (rounded up, at least 1) when blocked, else null. */
  retryAfterS: number | null
  /** `X-RateLimit-Remaining`, `X-RateLimit-Clear` and, when blocked, `X-RateLimit-Reset` and `Retry-After`. */
  xRateLimitHeaders(): Array<[string, string]>
  /** `RateLimit-Policy` and `RateLimit` for the policy named `policy`, and `Retry-After` when blocked. */
  ietfHeaders(policy: string): Array<[string, string]>
}

/** When a delayed job may start (`ratelane::server::Scheduled`). */
export interface Scheduled {
  /** True when the job runs now; it needs no release. */
  runNow: boolean
  /** When to start (and then release) the job, on the `nowNs` clock. */
  releaseAtNs: number
  /** The group's delayed jobs not released yet. */
  waiting: number
}

export interface StoreOptions {
  /** The most keys kept (default 100000); see `untracked`. */
  maxKeys?: number | null
}

export interface LeakyBucketOptions extends StoreOptions {
  /** Requests drained per drip (default 1). */
  dripSize?: number | null
  /** At most one request per this many ns (a second bucket of size 1). */
  minIntervalNs?: number | null
}

/** A Misskey/Sharkey legacy limit: `max` per `durationNs`, and/or one per `minIntervalNs`. */
export interface LegacyLimit extends StoreOptions {
  max?: number | null
  durationNs?: number | null
  minIntervalNs?: number | null
}

/** What every keyed store reports about itself. */
export interface CoreStoreCounts {
  /** Keys currently stored. */
  readonly len: number
  /** New keys answered without being stored because the store was full of live keys. */
  readonly untracked: number
  /** The bound on stored keys. */
  readonly maxKeys: number
}

/** GCRA per key (`ratelane::server::GcraStore`). */
export interface CoreGcraStore extends CoreStoreCounts {
  check(key: string, nowNs: number): ServerDecision
  /** Throws `insufficient_capacity` (with `requested`, `capacity`) when `n` exceeds the burst. */
  checkN(key: string, nowNs: number, n: number): ServerDecision
}

/** A leaky bucket per key (`ratelane::server::LeakyBucketStore`). */
export interface CoreLeakyBucketStore extends CoreStoreCounts {
  check(key: string, nowNs: number): ServerDecision
  /** The bucket scaled by `factor` in (0, 1] for this subject; another factor: `invalid_config`. */
  checkScaled(key: string, nowNs: number, factor: number): ServerDecision
}

/** A fixed window per key (`ratelane::server::FixedWindowStore`). */
export interface CoreFixedWindowStore extends CoreStoreCounts {
  check(key: string, nowNs: number): ServerDecision
  schedule(key: string, nowNs: number): Scheduled
  release(key: string, nowNs: number): boolean
}

/** The core surface as a package exports it (js/CONTRACT.md): the object API. */
export interface CoreModule {
  Limiter: new (configJson?: string | null) => CoreLimiter
  SimServer: new (serverConfigJson?: string | null) => CoreSimServer
  Simulation: new (
    configJson?: string | null,
    serverConfigJson?: string | null,
    simConfigJson?: string | null,
  ) => CoreSimulation
  GcraStore: {
    new (intervalNs: number, burst: number, options?: StoreOptions | null): CoreGcraStore
    perWindow(quota: number, windowNs: number, options?: StoreOptions | null): CoreGcraStore
  }
  LeakyBucketStore: {
    new (size: number, dripRateNs: number, options?: LeakyBucketOptions | null): CoreLeakyBucketStore
    fromLegacy(limit: LegacyLimit): CoreLeakyBucketStore
  }
  FixedWindowStore: new (quota: number, windowNs: number, options?: StoreOptions | null) => CoreFixedWindowStore
  readonly FAIL_CODES: readonly string[]
  readonly ERROR_CODES: readonly string[]
  /** The model and estimated tokens of an OpenAI or Anthropic request body; null for another body. */
  readLlmRequest(body: string | Uint8Array): LlmRequest | null
}

/**
 * What a core module (napi or wasm) exports: `createRatelane`'s argument. The engine and the
 * simulator are positional; the packages export them as `CoreModule` has them.
 */
export interface NativeModule {
  Limiter: new (configJson?: string | null) => NativeLimiter
  SimServer: new (serverConfigJson?: string | null) => NativeSimServer
  Simulation: new (
    configJson?: string | null,
    serverConfigJson?: string | null,
    simConfigJson?: string | null,
  ) => NativeSimulation
  GcraStore: {
    new (intervalNs: number, burst: number, options?: StoreOptions | null): CoreGcraStore
    perWindow(quota: number, windowNs: number, options?: StoreOptions | null): CoreGcraStore
  }
  LeakyBucketStore: {
    new (size: number, dripRateNs: number, options?: LeakyBucketOptions | null): CoreLeakyBucketStore
    fromLegacy(limit: LegacyLimit): CoreLeakyBucketStore
  }
  FixedWindowStore: new (quota: number, windowNs: number, options?: StoreOptions | null) => CoreFixedWindowStore
  readonly FAIL_CODES: readonly string[]
  readonly ERROR_CODES: readonly string[]
  /** The model and estimated tokens of an OpenAI or Anthropic request body; null for another body. */
  readLlmRequest(body: string | Uint8Array): LlmRequest | null
}
