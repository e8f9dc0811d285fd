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
  /** i32; higher goes first for the global budget. Default 0. */
  priority?: number | null
  idempotent?: boolean | null
  globalExempt?: boolean | null
}

/** Discord's 429 JSON fields. */
export interface BodyHints {
  retryAfter?: number | null
  global?: boolean | null
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
  | 'retries_exhausted'
  | 'maybe_sent'
  | 'network_error'
  | 'unauthorized'
  | 'closed'

/** Codes of misuse errors (`ERROR_CODES`, plus `invalid_argument` from the binding). */
export type ErrorCode =
  | 'unknown_request'
  | 'invalid_state'
  | 'invalid_config'
  | 'invalid_request'
  | 'limiter_closed'
  | 'invalid_argument'

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
  globalWindowNs: number
  marginNs: number
  invalidLimit: number
  invalidWindowNs: number
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

/** Shared mode: the store's answer, for `handleReservation`. */
export type ReservationAnswer =
  | { answer: 'granted' }
  | { answer: 'denied'; retryAfterNs: number; scope: SharedScopeName }
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
      /** retries_exhausted, network_error. */
      attempts?: number
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
  body: { retryAfter: number | null; global: boolean | null }
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
  global_limit: { limit: number; window_ns: number; kind: 'fixed' | 'sliding' } | null
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

/** The sans-IO engine, one to one with `ratelane::Limiter`. */
export interface CoreLimiter {
  enqueue(nowNs: number, request: RequestSpec): number
  handleResponse(nowNs: number, id: number, response: ResponseSpec): Disposition
  handleFailure(nowNs: number, id: number, failure: TransportFailure): Disposition
  cancel(nowNs: number, id: number): void
  handleTimeout(nowNs: number): void
  close(nowNs: number): void
  /** Shared mode: the store's answer to the `reserve` output of request `id`. */
  handleReservation(nowNs: number, id: number, answer: ReservationAnswer): void
  pollOutput(): Output
  drain(): Output[]
  predict(nowNs: number, request: RequestSpec): number
  readonly queued: number
  readonly inFlight: number
  /** Shared mode: requests waiting for their reservation's answer. */
  readonly reserving: number
  readonly buckets: number
  readonly isClosed: boolean
  configJson(): string
}

export interface CoreSimServer {
  handle(nowNs: number, request: RequestSpec): SimResponseSpec
  count429(): number
}

export interface CoreSimulation {
  enqueueAt(atNs: number, request: RequestSpec): number
  cancelAt(atNs: number, ticket: number): void
  closeAt(atNs: number): void
  run(): SimReport
}

/** What a core module (napi or wasm) exports. */
export interface CoreModule {
  Limiter: new (configJson?: string | null) => CoreLimiter
  SimServer: new (serverConfigJson?: string | null) => CoreSimServer
  Simulation: new (
    configJson?: string | null,
    serverConfigJson?: string | null,
    simConfigJson?: string | null,
  ) => CoreSimulation
  readonly FAIL_CODES: readonly string[]
  readonly ERROR_CODES: readonly string[]
}
