// The Promise driver of ratelane, shared by the Node package (napi) and the wasm package.
//
// Written once, as a factory over the core surface of js/CONTRACT.md: `createRatelane(core)`
// returns the driver (`RateLimiter`), the error classes and the core's own classes. This file
// has no `require`, `import` or `export` and uses no Node-only API (no `process`, `Buffer`,
// `events`); each package's build appends one export line to make `driver.cjs` and
// `driver.mjs` (js/README.md). Time comes from `performance.now()`, timers from `setTimeout`.
// A Node entry may pass `host.diagnosticsChannel` (`node:diagnostics_channel`), from which the
// driver learns when fetch/undici wrote a request.
//
// The driver converts and does I/O, nothing else: which request goes when, what a 429 means,
// whether to retry, how long to wait — every such decision is the core's.

/* eslint-disable no-unused-vars */
function createRatelane(core, host) {
  'use strict'

  // ------------------------------------------------------------------ errors

  /** The root of every error ratelane throws or rejects with. `code` is the core's code. */
  class RatelaneError extends Error {
    constructor(code, message, options) {
      super(message, options && options.cause !== undefined ? { cause: options.cause } : undefined)
      this.name = new.target.name
      this.code = code
    }
  }

  /** Caller misuse: the core's misuse codes, and `invalid_argument` for wrong JS values. */
  class UsageError extends RatelaneError {}
  class UnknownRequestError extends UsageError {}
  class InvalidStateError extends UsageError {}
  class InvalidConfigError extends UsageError {}
  class InvalidRequestError extends UsageError {}
  class LimiterClosedError extends UsageError {}
  /** `restore` on a limiter that holds requests. */
  class LimiterBusyError extends UsageError {}
  /** A snapshot `restore` refuses; `code` says why (the three subclasses). */
  class SnapshotError extends UsageError {}
  class SnapshotForeignError extends SnapshotError {}
  class SnapshotVersionError extends SnapshotError {}
  class SnapshotMalformedError extends SnapshotError {}
  class InvalidArgumentError extends UsageError {}
  /** A simulation found that the limiter broke the driver contract (a core bug). */
  class SimulationContractError extends RatelaneError {}

  /** A request ended without an answer. One subclass per core failure code. */
  class RateLimitError extends RatelaneError {
    constructor(code, message, details) {
      super(code, message, details)
      const d = details || {}
      /** The request's method and path. */
      this.method = d.method
      this.path = d.path
      /** How many times it was sent (when the core says). */
      this.attempts = d.attempts === undefined ? null : d.attempts
      /** The last response received for it, if any (e.g. the last 429). */
      this.response = d.response === undefined ? null : d.response
    }
  }
  /** The request could not be sent before its deadline. */
  class DeadlineExceededError extends RateLimitError {
    constructor(code, message, details) {
      super(code, message, details)
      /** When the core predicted it could be sent, in ms on the `performance.now()` clock, or null. */
      this.predictedSendAt = details.predictedSendAt === undefined ? null : details.predictedSendAt
      /** The same prediction as a wait from the moment it failed, in ms, or null. */
      this.predictedWait = details.predictedWait === undefined ? null : details.predictedWait
    }
  }
  /** The predicted wait exceeded `maxWait`. */
  class MaxWaitExceededError extends RateLimitError {
    constructor(code, message, details) {
      super(code, message, details)
      /** The predicted wait before sending, in ms. */
      this.predictedWait = details.predictedWait
    }
  }
  /**
   * The predicted wait exceeded the request's `deferAfter`: instead of waiting, it is handed
   * back to be run again at `retryAt` (a job queue's delayed retry).
   */
  class DeferredError extends RateLimitError {
    constructor(code, message, details) {
      super(code, message, details)
      /** When the core predicts it could be sent, in ms on the `performance.now()` clock. */
      this.retryAt = details.retryAt
      /** The same moment on the wall clock, in whole ms since the Unix epoch (`Date.now()`'s clock), rounded up. */
      this.retryAtMs = details.retryAtMs
      /** The same moment as a `Date`. */
      this.retryAtDate = new Date(details.retryAtMs)
      /** Ms from the moment it failed until then. */
      this.retryAfter = details.retryAfter
    }
  }
  /**
   * A cost above a whole budget: it can never be admitted. A request whose estimated cost in a
   * dimension (the `costs` option, `{ tokens: 1200 }`) is above the limit the server reports
   * for that dimension (`dimension`, `cost`, `limit`); or a server-side `GcraStore.checkN`
   * weight above the burst (`requested` and `capacity`, the same numbers as `cost` and
   * `limit`; `dimension` null).
   */
  class InsufficientCapacityError extends RateLimitError {
    constructor(code, message, details) {
      super(code, message, details)
      const d = details || {}
      const cost = d.cost !== undefined ? d.cost : d.requested
      const limit = d.limit !== undefined ? d.limit : d.capacity
      /** The dimension (`tokens`, ...); null for a server-side `checkN`. */
      this.dimension = d.dimension === undefined ? null : d.dimension
      /** The estimated cost (the weight asked for). */
      this.cost = cost
      /** The dimension's whole limit as the server reported it (the burst). */
      this.limit = limit
      /** `cost`, by the server-side name. */
      this.requested = cost
      /** `limit`, by the server-side name. */
      this.capacity = limit
    }
  }
  /** Still rate limited after `maxRateLimitRetries` re-sends. */
  class RetriesExhaustedError extends RateLimitError {}
  /** The transport failed after the request may have reached the server; not re-sent. */
  class MaybeSentError extends RateLimitError {}
  /** The transport failed before the request reached the server, too many times. */
  class NetworkError extends RateLimitError {}
  /** The token was rejected with 401; its requests are no longer sent. */
  class UnauthorizedError extends RateLimitError {}
  /** The limiter was closed while the request was queued. */
  class ClosedError extends RateLimitError {}

  const FAIL_CLASSES = {
    deadline_exceeded: DeadlineExceededError,
    max_wait_exceeded: MaxWaitExceededError,
    deferred: DeferredError,
    retries_exhausted: RetriesExhaustedError,
    maybe_sent: MaybeSentError,
    network_error: NetworkError,
    unauthorized: UnauthorizedError,
    closed: ClosedError,
    insufficient_capacity: InsufficientCapacityError,
  }
  const USAGE_CLASSES = {
    unknown_request: UnknownRequestError,
    invalid_state: InvalidStateError,
    invalid_config: InvalidConfigError,
    invalid_request: InvalidRequestError,
    limiter_closed: LimiterClosedError,
    limiter_busy: LimiterBusyError,
    snapshot_foreign: SnapshotForeignError,
    snapshot_version: SnapshotVersionError,
    snapshot_malformed: SnapshotMalformedError,
    invalid_argument: InvalidArgumentError,
    simulation_contract: SimulationContractError,
  }

  // A new code in the core must get a class here, never slip through as a bare Error.
  for (const [list, classes, what] of [
    [core.FAIL_CODES, FAIL_CLASSES, 'failure'],
    [core.ERROR_CODES, USAGE_CLASSES, 'error'],
  ]) {
    if (!Array.isArray(list) || list.length === 0) {
      throw new Error(`ratelane: the core module exports no ${what} code list`)
    }
    for (const code of list) {
      if (!Object.prototype.hasOwnProperty.call(classes, code)) {
        throw new Error(`ratelane: the core's ${what} code "${code}" has no error class in js/driver.js`)
      }
    }
  }

  /**
   * The matching class for an error thrown by the core (an `Error` with a string `code`);
   * any other value is returned as it is.
   */
  function fromCoreError(error) {
    if (error instanceof RatelaneError) return error
    if (error && error.code === 'insufficient_capacity') {
      // A server-side checkN (the client-side failure comes as a `fail` output instead).
      return new InsufficientCapacityError(error.code, error.message, { cause: error, requested: error.requested, capacity: error.capacity })
    }
    const cls = error && typeof error.code === 'string' ? USAGE_CLASSES[error.code] : undefined
    return cls ? new cls(error.code, error.message, { cause: error }) : error
  }

  function usage(cls, code, message) {
    return new cls(code, message)
  }

  // ------------------------------------------------------------------ options

  const MS = 'ms'
  const COUNT = 'count'
  /** camelCase option -> [core JSON key, kind]. The one place driver options become core config. */
  const OPTION_KEYS = {
    profile: ['profile', 'profile'],
    globalLimit: ['global_limit', COUNT],
    globalWindow: ['global_window_ns', MS],
    globalMarginMax: ['global_margin_max_ns', MS],
    maxWait: ['max_wait_ns', 'ms_or_null'],
    deferAfter: ['defer_after_ns', 'ms_or_null'],
    maxRateLimitRetries: ['max_rate_limit_retries', COUNT],
    maxErrorRetries: ['max_error_retries', COUNT],
    backoffBase: ['backoff_base_ns', MS],
    backoffMax: ['backoff_max_ns', MS],
    minRateLimitWait: ['min_rate_limit_wait_ns', MS],
    maxServerWait: ['max_server_wait_ns', MS],
    invalidRequestLimit: ['invalid_request_limit', COUNT],
    invalidRequestWindow: ['invalid_request_window_ns', MS],
    invalidRequestStopAt: ['invalid_request_stop_at', COUNT],
    invalidRequestWarnAt: ['invalid_request_warn_at', COUNT],
    edgeBackoffBase: ['edge_backoff_base_ns', MS],
    edgeBackoffMax: ['edge_backoff_max_ns', MS],
    stopOnUnauthorized: ['stop_on_unauthorized', 'boolean'],
    jitterSeed: ['jitter_seed', COUNT],
    maxRoutes: ['max_routes', COUNT],
    bucketIdleTtl: ['bucket_idle_ttl_ns', MS],
    routeGroups: ['route_groups', 'json'],
  }
  /** Options of the driver itself (not passed to the core). */
  const DRIVER_OPTIONS = new Set(['identity'])
  // The core's header profiles (`ratelane::HeaderProfile::NAMES`): the provider packs
  // `openai`, `anthropic`, `azure_openai`, `shopify`, and `auto` beside the first four.
  const PROFILES = new Set(['discord', 'ietf', 'github', 'retry_after_only', 'openai', 'anthropic', 'azure_openai', 'shopify', 'auto'])

  /**
   * `run`'s per-request options (and `predictWait`'s) and what each takes; `null` and
   * `undefined` mean absent. An unknown name or a value of another type is
   * `InvalidArgumentError`, naming the valid options or the type given (the core checks ranges).
   */
  const RUN_OPTIONS = {
    signal: ['an AbortSignal', (v) => typeof v === 'object' && typeof v.addEventListener === 'function' && typeof v.aborted === 'boolean'],
    deadline: ['a number of ms >= 0', (v) => typeof v === 'number'],
    deferAfter: ['a finite number of ms >= 0', (v) => typeof v === 'number'],
    major: ['a string', (v) => typeof v === 'string'],
    identity: ['a string', (v) => typeof v === 'string'],
    priority: ['an integer', (v) => typeof v === 'number'],
    idempotent: ['a boolean', (v) => typeof v === 'boolean'],
    globalExempt: ['a boolean', (v) => typeof v === 'boolean'],
    subLimit: ['a string', (v) => typeof v === 'string'],
    bodyKeys: ['an array of strings or the JSON body object', (v) => typeof v === 'object'],
    costs: ['an object', () => true], // checked where it crosses, naming request.costs (costParts)
    model: ['a string', (v) => typeof v === 'string'],
  }

  /** Throws InvalidArgumentError for an unknown per-request option or a value of the wrong type. */
  function checkRunOptions(opts) {
    if (typeof opts !== 'object' || Array.isArray(opts)) {
      throw usage(InvalidArgumentError, 'invalid_argument', `options must be an object, got ${typeName(opts)}`)
    }
    for (const name of Object.keys(opts)) {
      const entry = Object.prototype.hasOwnProperty.call(RUN_OPTIONS, name) ? RUN_OPTIONS[name] : undefined
      if (entry === undefined) {
        throw usage(InvalidArgumentError, 'invalid_argument',
          `unknown option "${name}"; expected one of: ${Object.keys(RUN_OPTIONS).join(', ')}`)
      }
      const value = opts[name]
      if (value !== undefined && value !== null && !entry[1](value)) {
        throw usage(InvalidArgumentError, 'invalid_argument', `${name} must be ${entry[0]}, got ${shown(value)}`)
      }
    }
  }

  function badOption(message) {
    return usage(InvalidConfigError, 'invalid_config', `invalid configuration: ${message}`)
  }

  /**
   * A value as a message shows it: a number as itself, a string quoted after its type (so
   * `maxWait: '30000'` reads `a string ("30000")`, not `30000`), anything else by its type.
   */
  function shown(value) {
    if (typeof value === 'number' || typeof value === 'boolean') return String(value)
    if (typeof value === 'string') return `a string (${JSON.stringify(value.length > 40 ? value.slice(0, 40) + '...' : value)})`
    return typeName(value)
  }

  function msToNs(value, name) {
    if (typeof value !== 'number' || !Number.isFinite(value) || value < 0) {
      throw badOption(`${name} must be a finite number of milliseconds >= 0, got ${shown(value)}`)
    }
    return Math.round(value * 1e6)
  }

  /**
   * `RateLimiter` options (camelCase, durations in ms) as the core's JSON configuration
   * (snake_case, durations in ns). Absent options keep the profile's defaults; unknown ones
   * throw `invalid_config`.
   */
  function toCoreConfig(options) {
    if (options === undefined || options === null) return {}
    if (typeof options !== 'object' || Array.isArray(options)) {
      throw badOption('options must be an object')
    }
    const config = {}
    for (const name of Object.keys(options)) {
      const value = options[name]
      if (DRIVER_OPTIONS.has(name) || value === undefined) continue
      if (name === 'shared') {
        throw badOption('shared is the store object of the RateLimiter (new RateLimiter({ shared: store })), ' +
          'not a core setting; give the core\'s shared settings through the store\'s coreSettings()')
      }
      const entry = Object.prototype.hasOwnProperty.call(OPTION_KEYS, name) ? OPTION_KEYS[name] : undefined
      if (!entry) {
        const known = Object.keys(OPTION_KEYS).concat([...DRIVER_OPTIONS], ['shared'], Object.keys(EVENT_CALLBACKS)).join(', ')
        throw badOption(`unknown option "${name}"; expected one of: ${known}`)
      }
      const [key, kind] = entry
      if (kind === MS) {
        config[key] = msToNs(value, name)
      } else if (kind === 'ms_or_null') {
        config[key] = value === null || value === Infinity ? null : msToNs(value, name)
      } else if (kind === COUNT) {
        if (!Number.isSafeInteger(value) || value < 0) {
          throw badOption(`${name} must be an integer >= 0, got ${shown(value)}`)
        }
        config[key] = value
      } else if (kind === 'json') {
        config[key] = value // checked by the core, which names the bad entry
      } else if (kind === 'boolean') {
        if (typeof value !== 'boolean') throw badOption(`${name} must be a boolean, got ${shown(value)}`)
        config[key] = value
      } else {
        if (!PROFILES.has(value)) {
          throw badOption(`profile must be one of ${[...PROFILES].join(', ')}, got ${shown(value)}`)
        }
        config[key] = value
      }
    }
    return config
  }

  /**
   * The packed drain's kinds (`drainInto`, `drainPacked`: js/CONTRACT.md, "The positional
   * surface"); 3: an output is held.
   */
  const PACKED_SEND = 0
  const PACKED_WAIT_UNTIL = 1
  const PACKED_IDLE = 2

  // ------------------------------------------------------------------ the positional surface

  /** A wrong JS value caught before it crosses, as the core module reports one. */
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

  const COSTS_SHAPE = 'request.costs must be an object of dimension names to whole numbers (e.g. { tokens: 1200 })'

  /**
   * `request.costs` as `enqueueParts` takes it: `[names, amounts]` in the object's key order
   * (an entry that is `undefined` or `null` is left out), `null` for none. The core module
   * checks that each amount is a whole number and the core checks the names.
   */
  function costParts(costs) {
    if (costs === undefined || costs === null) return null
    if (typeof costs !== 'object' || Array.isArray(costs)) throw argumentError(`${COSTS_SHAPE}, got ${typeName(costs)}`)
    const names = []
    const amounts = []
    for (const name of Object.keys(costs)) {
      const amount = costs[name]
      if (amount === undefined || amount === null) continue
      if (typeof amount !== 'number') {
        throw argumentError(`request.costs.${name} must be a whole number >= 0 (the estimated cost), got ${typeName(amount)}`)
      }
      names.push(name)
      amounts.push(amount)
    }
    return [names, amounts]
  }

  /** A list of strings, or absent (`null`); anything else is `invalid_argument` naming `what`. */
  function stringList(value, what) {
    if (value === undefined || value === null) return null
    if (!Array.isArray(value) || !value.every((v) => typeof v === 'string')) {
      throw argumentError(`${what} must be an array of strings, got ${typeName(value)}`)
    }
    return value
  }

  /**
   * The model and estimated tokens of an OpenAI or Anthropic request body (a string or a
   * Uint8Array): `{ model, tokens }` (`model` null when the body names none), or null for a
   * body that is not such JSON. The core's `ratelane::llm::read_request`, as every binding has it.
   */
  function readLlmRequest(body) {
    try {
      return core.readLlmRequest(body)
    } catch (error) {
      throw fromCoreError(error)
    }
  }

  /**
   * A `RequestSpec` as the arguments of `enqueueParts` after the time (spread), and as the
   * one array `predictParts`, `handleParts` and `enqueueAtParts` take.
   */
  function requestParts(spec) {
    if (spec === null || typeof spec !== 'object') throw argumentError(`request must be an object, got ${typeName(spec)}`)
    const costs = costParts(spec.costs)
    return [spec.method, spec.path, spec.identity, spec.major, spec.deadlineNs, spec.deferAfterNs, spec.priority,
      spec.idempotent, spec.globalExempt, spec.subLimit, stringList(spec.bodyKeys, 'request.bodyKeys'),
      costs === null ? null : costs[0], costs === null ? null : costs[1], spec.model]
  }

  function numberOrNull(value) {
    return typeof value === 'number' ? value : null
  }

  /**
   * `handleResponse` on the positional surface: `headers` as `respond` takes them (one string
   * of lines, or a flat list), `hints` a `BodyHints` or null.
   */
  function respond(core, now, id, status, headers, wallClockMs, hints) {
    if (hints === undefined || hints === null) return core.respond(now, id, status, headers, wallClockMs)
    if (typeof hints !== 'object') throw argumentError(`response.body must be an object, got ${typeName(hints)}`)
    const c = hints.cost
    const cost = c === undefined || c === null ? null
      : [numberOrNull(c.requested), numberOrNull(c.actual), numberOrNull(c.maximumAvailable),
          numberOrNull(c.currentlyAvailable), numberOrNull(c.restoreRate)]
    let names = null
    let values = null
    const usage = hints.usage
    if (usage !== undefined && usage !== null) {
      if (typeof usage !== 'object' || Array.isArray(usage)) {
        throw argumentError(`response.body.usage must be an object of numbers, got ${typeName(usage)}`)
      }
      // What a server sent: an entry that is not a number is left out rather than refused.
      names = []
      values = []
      for (const name of Object.keys(usage)) {
        if (names.length === MAX_USAGE) break
        if (typeof usage[name] === 'number') {
          names.push(name)
          values.push(usage[name])
        }
      }
    }
    return core.respond(now, id, status, headers, wallClockMs, hints.retryAfter, hints.global, cost,
      stringList(hints.errors, 'response.body.errors'), names, values)
  }

  /** `ResponseSpec.headers` (an array of `[name, value]` pairs) as `respond`'s flat list. */
  function flatHeaders(pairs) {
    if (!Array.isArray(pairs)) throw argumentError(`response.headers must be an array of [name, value] pairs, got ${typeName(pairs)}`)
    const flat = []
    for (const pair of pairs) {
      if (!Array.isArray(pair) || pair.length !== 2 || typeof pair[0] !== 'string' || typeof pair[1] !== 'string') {
        throw argumentError('response.headers must be an array of [name, value] pairs')
      }
      flat.push(pair[0], pair[1])
    }
    return flat
  }

  /** `handleReservation(nowNs, id, answer)` (a `ReservationAnswer`) on the positional surface. */
  function answerReservation(core, now, id, answer) {
    if (answer === null || typeof answer !== 'object') throw argumentError(`answer must be an object, got ${typeName(answer)}`)
    core.answerReservation(now, id, answer.answer, answer.processes, answer.leased, answer.storeTimeUs,
      answer.retryAfterNs, answer.scope)
  }

  /** A snake_case key of the core's serde form as the contract's camelCase. */
  function camel(key) {
    return key.replace(/_([a-z])/g, (_, c) => c.toUpperCase())
  }

  function camelObject(value) {
    const out = {}
    for (const key of Object.keys(value)) out[camel(key)] = value[key]
    return out
  }

  /**
   * The output `takeHeld()` handed out (JSON text of the core's serde form) as the contract's
   * `Output` object (js/CONTRACT.md). Absent fields are left out, `null` where the core has
   * `None` for a field the contract always carries.
   */
  function outputObject(text) {
    const { output, message } = JSON.parse(text)
    if (typeof output === 'string') return { type: output }
    const kind = Object.keys(output)[0]
    const value = output[kind]
    switch (kind) {
      case 'send':
        return { type: 'send', id: value }
      case 'wait_until':
        return { type: 'wait_until', atNs: value }
      case 'fail': {
        const [id, reason] = value
        const fail = { type: 'fail', id, code: reason.code, message }
        if (reason.code === 'deadline_exceeded') fail.predictedSendAtNs = reason.predicted_send_at
        if (reason.predicted_wait !== undefined) fail.predictedWaitNs = reason.predicted_wait
        if (reason.retry_at !== undefined) fail.retryAtNs = reason.retry_at
        if (reason.attempts !== undefined) fail.attempts = reason.attempts
        if (reason.code === 'insufficient_capacity') {
          fail.dimension = reason.dimension
          fail.cost = reason.cost
          fail.limit = reason.limit
        }
        return fail
      }
      case 'observe': {
        const observed = camelObject(value)
        if (observed.retryAfter !== undefined) { observed.retryAfterNs = observed.retryAfter; delete observed.retryAfter }
        if (observed.retryAt !== undefined) { observed.retryAtNs = observed.retryAt; delete observed.retryAt }
        return observed
      }
      case 'reserve': {
        const reservation = camelObject(value)
        if (reservation.processesSinceNs === undefined) reservation.processesSinceNs = null
        if (reservation.reporting === undefined) reservation.reporting = false
        if (reservation.unrecordedNs === undefined) reservation.unrecordedNs = []
        if (reservation.grantedNs === undefined) reservation.grantedNs = []
        return { type: 'reserve', id: reservation.id, reservation }
      }
      case 'share': {
        const update = { kind: value.share }
        for (const key of Object.keys(value)) if (key !== 'share') update[camel(key)] = value[key]
        return { type: 'share', update }
      }
      default:
        return { type: kind, value }
    }
  }

  /** One packed drain pair as an `Output` object (kind 3: the held output). */
  function packedObject(native, kind, value) {
    if (kind === PACKED_SEND) return { type: 'send', id: value }
    if (kind === PACKED_WAIT_UNTIL) return { type: 'wait_until', atNs: value }
    if (kind === PACKED_IDLE) return { type: 'idle' }
    return outputObject(native.takeHeld())
  }

  // ------------------------------------------------------------------ the object API

  /**
   * The sans-IO engine with the object API of js/CONTRACT.md (`Limiter`): requests, responses
   * and answers as objects, outputs as objects. Written once, here, over the core module's
   * positional surface, for both packages.
   */
  class Limiter {
    constructor(configJson) {
      this._native = new core.Limiter(configJson)
      /** Where the core writes each drain's pairs (`drainInto`). */
      this._drained = new Float64Array(32)
    }

    enqueue(nowNs, request) { return this._native.enqueueParts(nowNs, ...requestParts(request)) }
    handleResponse(nowNs, id, response) {
      if (response === null || typeof response !== 'object') {
        throw argumentError(`response must be an object, got ${typeName(response)}`)
      }
      return respond(this._native, nowNs, id, response.status, flatHeaders(response.headers), response.wallClockMs,
        response.body)
    }
    handleFailure(nowNs, id, failure) { return this._native.handleFailure(nowNs, id, failure) }
    handleWritten(nowNs, id) { this._native.handleWritten(nowNs, id) }
    cancel(nowNs, id) { this._native.cancel(nowNs, id) }
    handleTimeout(nowNs) { this._native.handleTimeout(nowNs) }
    close(nowNs) { this._native.close(nowNs) }
    handleReservation(nowNs, id, answer) { answerReservation(this._native, nowNs, id, answer) }
    restore(nowNs, wallClockMs, snapshot) { this._native.restore(nowNs, wallClockMs, snapshot) }

    /** The next output. */
    pollOutput() {
      const packed = this._drained
      this._native.drainInto(packed, true)
      return packedObject(this._native, packed[0], packed[1])
    }

    /** Every output up to and including the `wait_until` or `idle` that ends the drain. */
    drain() {
      const outputs = []
      const packed = this._drained
      for (;;) {
        const n = this._native.drainInto(packed)
        for (let i = 0; i < n; i += 2) {
          outputs.push(packedObject(this._native, packed[i], packed[i + 1]))
          if (packed[i] === PACKED_WAIT_UNTIL || packed[i] === PACKED_IDLE) return outputs
        }
      }
    }

    predict(nowNs, request) { return this._native.predictParts(nowNs, requestParts(request)) }
    snapshot(nowNs, wallClockMs) { return this._native.snapshot(nowNs, wallClockMs) }
    invalidRequests(nowNs) { return this._native.invalidRequests(nowNs) }
    readsBody(status) { return this._native.readsBody(status) }
    configJson() { return this._native.configJson() }
    get queued() { return this._native.queued }
    get inFlight() { return this._native.inFlight }
    get reserving() { return this._native.reserving }
    get buckets() { return this._native.buckets }
    get isClosed() { return this._native.isClosed }
    /** wasm: releases the module's memory now rather than when collected. */
    free() { if (typeof this._native.free === 'function') this._native.free() }
  }

  /** The simulated server of js/CONTRACT.md (`SimServer`), over the core module's. */
  class SimServer {
    constructor(serverConfigJson) {
      this._native = new core.SimServer(serverConfigJson)
    }

    handle(nowNs, request, tokens) { return this._native.handleParts(nowNs, tokens, requestParts(request)) }
    count429() { return this._native.count429() }
    free() { if (typeof this._native.free === 'function') this._native.free() }
  }

  /** A limiter against a `SimServer` in virtual time (`Simulation`), over the core module's. */
  class Simulation {
    constructor(configJson, serverConfigJson, simConfigJson) {
      this._native = new core.Simulation(configJson, serverConfigJson, simConfigJson)
    }

    enqueueAt(atNs, request) { return this._native.enqueueAtParts(atNs, requestParts(request)) }
    cancelAt(atNs, ticket) { this._native.cancelAt(atNs, ticket) }
    closeAt(atNs) { this._native.closeAt(atNs) }
    run() { return this._native.run() }
    free() { if (typeof this._native.free === 'function') this._native.free() }
  }

  // ------------------------------------------------------------------ time

  const clock = typeof performance !== 'undefined' && performance && typeof performance.now === 'function'
    ? () => performance.now()
    : () => Date.now()
  /** Monotonic now in integer ns, the core's clock. */
  function nowNs() {
    return Math.round(clock() * 1e6)
  }
  /** setTimeout's longest delay; an earlier wake-up is harmless. */
  const MAX_TIMER_MS = 0x7fffffff

  // ------------------------------------------------------------------ abort signals

  // One 'abort' listener per signal, however many requests share it (a bot's one shutdown
  // signal on every request): an EventTarget walks its listeners on every add and remove, so
  // a listener per request made a burst of n requests on one signal cost O(n^2) (500 `run`
  // calls took 16-28 ms instead of 6). signal -> the entries (of any limiter) it aborts.
  const abortWaiters = new WeakMap()

  function listenForAbort(signal, entry) {
    let waiting = abortWaiters.get(signal)
    if (waiting === undefined) {
      const entries = new Set()
      const onAbort = () => {
        abortWaiters.delete(signal)
        for (const e of Array.from(entries)) e.onAbort()
      }
      waiting = { entries, onAbort }
      abortWaiters.set(signal, waiting)
      signal.addEventListener('abort', onAbort, { once: true })
    }
    waiting.entries.add(entry)
  }

  function stopListening(signal, entry) {
    const waiting = abortWaiters.get(signal)
    if (waiting === undefined || !waiting.entries.delete(entry) || waiting.entries.size > 0) return
    abortWaiters.delete(signal)
    signal.removeEventListener('abort', waiting.onAbort)
  }

  // ------------------------------------------------------------------ starting sends

  // Each `send` runs synchronously where the core says so, and a fetch() costs tenths of a
  // millisecond before it returns (more while the runtime is cold), yet writes nothing until
  // the event loop turns. A burst of a few hundred sends started in one turn held every
  // request back until the last had been made: on the Scoreboard's `interactions` the first
  // request reached the server about 220 ms after the submission with Node's fetch. So one
  // turn starts sends for at most START_BUDGET_MS, and the rest start on the next turns, in
  // the core's order: the first requests are written while the later ones are being made.
  const START_BUDGET_MS = 2
  /**
   * Runs `fn` on the next turn of the event loop, after pending I/O (setImmediate: Node, Bun),
   * or null where the runtime has none. There every send starts at once, as before the
   * budget: a browser clamps chained zero timeouts to 4 ms, which would slow a long burst
   * down instead, and a MessageChannel can keep a server runtime alive.
   */
  const nextTurn = typeof setImmediate === 'function' ? (fn) => { setImmediate(fn) } : null

  // ------------------------------------------------------------------ when a request left

  // Node's fetch and the undici package publish each request on `diagnostics_channel`:
  // `undici:request:create` synchronously inside the fetch()/request() call, and
  // `undici:client:sendHeaders` when its headers are written to the socket, which on a busy
  // event loop, or when the connection had to be opened first, is well after the core's
  // `send` output. The driver marks the attempt it is starting while `send` runs, ties the
  // undici request created meanwhile to it, and reports the write (`handleWritten`), so the
  // core counts the global window from when the request left. A `send` that creates its
  // request later (after an await) or with another client is simply not reported: the core
  // then counts from the `send` output, as without this hook. The module comes from the
  // package's Node entry (`host.diagnosticsChannel`); the web and bundler builds have none.
  const writes = (() => {
    const channels = host && host.diagnosticsChannel
    if (!channels || typeof channels.subscribe !== 'function') return null
    const attempts = new WeakMap()
    let starting = null
    let subscribed = false
    const onCreate = (message) => {
      if (starting !== null && message && message.request) attempts.set(message.request, starting)
    }
    const onHeaders = (message) => {
      const attempt = message && message.request ? attempts.get(message.request) : undefined
      if (attempt === undefined) return
      attempts.delete(message.request)
      attempt.limiter._written(attempt.entry, attempt)
    }
    return {
      /**
       * Runs `send` with `owner` (the attempt's token: `{ limiter, entry }` among its fields)
       * marked as the attempt whose undici request is being made.
       */
      during(owner, send) {
        if (!subscribed) {
          channels.subscribe('undici:request:create', onCreate)
          channels.subscribe('undici:client:sendHeaders', onHeaders)
          subscribed = true
        }
        const outer = starting // a send that runs another limiter's run synchronously
        starting = owner
        try {
          return send()
        } finally {
          starting = outer
        }
      },
    }
  })()

  // ------------------------------------------------------------------ responses

  /**
   * Calls `each(name, value)` for every header of a fetch `Headers`, a `Map`, an array of
   * pairs or a plain object (whose array values are repeated headers), in order, as strings.
   */
  function forEachHeader(headers, each) {
    if (headers === undefined || headers === null) return
    if (Array.isArray(headers)) {
      for (let i = 0; i < headers.length; i++) each(String(headers[i][0]), String(headers[i][1]))
      return
    }
    if (typeof headers.forEach === 'function' && typeof headers.get === 'function') {
      headers.forEach((value, name) => { each(String(name), String(value)) })
      return
    }
    if (typeof headers[Symbol.iterator] === 'function') {
      for (const p of headers) each(String(p[0]), String(p[1]))
      return
    }
    for (const name of Object.keys(headers)) {
      const value = headers[name]
      if (Array.isArray(value)) for (const v of value) each(name, String(v))
      else if (value !== undefined && value !== null) each(name, String(value))
    }
  }

  /** Header pairs from a fetch `Headers`, a `Map`, an array of pairs or a plain object. */
  function headerPairs(headers) {
    const pairs = []
    forEachHeader(headers, (name, value) => { pairs.push([name, value]) })
    return pairs
  }

  /**
   * The same headers as `headerPairs`, as the core's fast path takes them: names and values on
   * alternate lines. `null` when a name or value holds a line break (HTTP forbids it, but a
   * hand-made response might), for which the caller uses the pairs instead.
   */
  function headerLines(headers) {
    let lines = ''
    let first = true
    let clean = true
    forEachHeader(headers, (name, value) => {
      if (name.indexOf('\n') !== -1 || value.indexOf('\n') !== -1) clean = false
      lines = first ? name + '\n' + value : lines + '\n' + name + '\n' + value
      first = false
    })
    return clean ? lines : null
  }

  /** The `bodyKeys` option: an array of strings, or a JSON body object (its own keys). */
  function bodyKeys(value) {
    if (Array.isArray(value)) return value
    if (typeof value === 'object' && !isStream(value)) return Object.keys(value)
    throw usage(InvalidArgumentError, 'invalid_argument', 'bodyKeys must be an array of strings or the JSON body object')
  }

  /** At most this many error strings, each at most this many UTF-8 bytes (`ratelane::BodyHints`). */
  const MAX_ERRORS = 16
  const MAX_ERROR_LEN = 256
  /** At most this many `usage` fields (`ratelane::BodyHints::MAX_USAGE`). */
  const MAX_USAGE = 16

  function finiteNumber(value) {
    return typeof value === 'number' && Number.isFinite(value) ? value : null
  }

  function at(value, ...keys) {
    for (const key of keys) {
      if (!value || typeof value !== 'object' || Array.isArray(value)) return undefined
      value = value[key]
    }
    return value
  }

  /** A string cut to MAX_ERROR_LEN UTF-8 bytes, on a character boundary. */
  function cutUtf8(text) {
    let bytes = 0
    let end = 0
    for (const ch of text) {
      const cp = ch.codePointAt(0)
      const size = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4
      if (bytes + size > MAX_ERROR_LEN) break
      bytes += size
      end += ch.length
    }
    return text.slice(0, end)
  }

  /** The error strings of a parsed body, from the fixed places `ratelane::BodyHints` lists. */
  function bodyErrors(parsed) {
    const found = []
    if (Array.isArray(parsed)) {
      for (const item of parsed) found.push(at(item, 'errorCode'))
    } else if (parsed && typeof parsed === 'object') {
      found.push(parsed.message, at(parsed, 'error', 'type'), at(parsed, 'error', 'code'), parsed.errorCode)
      const errors = parsed.errors
      if (typeof errors === 'string') {
        found.push(errors)
      } else if (Array.isArray(errors)) {
        for (const item of errors) found.push(at(item, 'type'), at(item, 'extensions', 'code'), at(item, 'message'))
      }
    }
    const out = []
    for (const text of found) {
      if (typeof text !== 'string') continue
      out.push(cutUtf8(text))
      if (out.length === MAX_ERRORS) break
    }
    return out
  }

  /**
   * The numeric fields of the body's top-level `usage` object (OpenAI `total_tokens`,
   * Anthropic `input_tokens`/`output_tokens`): finite numbers >= 0 only (not booleans, not
   * the nested `*_details` objects), the first MAX_USAGE of them. `null` when there is none.
   */
  function bodyUsage(parsed) {
    const usage = parsed.usage
    if (!usage || typeof usage !== 'object' || Array.isArray(usage)) return null
    const fields = {}
    let n = 0
    for (const name of Object.keys(usage)) {
      const value = usage[name]
      if (name === '__proto__' || typeof value !== 'number' || !Number.isFinite(value) || value < 0) continue
      fields[name] = value
      if (++n === MAX_USAGE) break
    }
    return n > 0 ? fields : null
  }

  /**
   * What the core reads from a parsed JSON body (`ratelane::BodyHints`), the same for every
   * profile: Discord's `retry_after`/`global`, a GraphQL `extensions.cost`, the error strings,
   * the `usage` fields. `null` when there is none.
   */
  function bodyHints(parsed) {
    if (parsed === null || typeof parsed !== 'object') return null
    const hints = {}
    if (!Array.isArray(parsed)) {
      const retryAfter = finiteNumber(parsed.retry_after)
      if (retryAfter !== null) hints.retryAfter = retryAfter
      if (typeof parsed.global === 'boolean') hints.global = parsed.global
      const cost = at(parsed, 'extensions', 'cost')
      if (cost && typeof cost === 'object' && !Array.isArray(cost)) {
        const fields = {
          requested: finiteNumber(cost.requestedQueryCost),
          actual: finiteNumber(cost.actualQueryCost),
          maximumAvailable: finiteNumber(at(cost, 'throttleStatus', 'maximumAvailable')),
          currentlyAvailable: finiteNumber(at(cost, 'throttleStatus', 'currentlyAvailable')),
          restoreRate: finiteNumber(at(cost, 'throttleStatus', 'restoreRate')),
        }
        if (Object.values(fields).some((v) => v !== null)) hints.cost = fields
      }
      const usage = bodyUsage(parsed)
      if (usage !== null) hints.usage = usage
    }
    const errors = bodyErrors(parsed)
    if (errors.length > 0) hints.errors = errors
    return Object.keys(hints).length > 0 ? hints : null
  }

  /**
   * False when the response's Content-Type says its body is not JSON (an event stream, HTML):
   * the body is then left alone, so a streamed answer is never read for hints. True without one.
   */
  function mayBeJson(response) {
    try {
      for (const [name, value] of headerPairs(response.headers)) {
        if (String(name).toLowerCase() === 'content-type') return String(value).toLowerCase().includes('json')
      }
    } catch (_) { /* unreadable headers: the body parser decides */ }
    return true
  }

  /** Bodies longer than this are not parsed (an HTML ban page, a hostile server). */
  const MAX_BODY_CHARS = 64 * 1024
  /**
   * The bound for the body of a request with costs, read for its `usage`: an LLM's answer
   * holds the whole completion before the usage, often more than 64 KiB.
   */
  const MAX_USAGE_BODY_CHARS = 1024 * 1024

  /**
   * The body fields of a 429 (or of any answer to a request with costs): from a clone of a
   * fetch `Response` (the caller's copy stays unread), or from a `body` that is a string or an
   * already parsed object. Bodies longer than `maxChars` are not parsed.
   */
  async function readHints(response, maxChars) {
    try {
      let text
      if (typeof response.clone === 'function') {
        const length = response.headers && typeof response.headers.get === 'function'
          ? Number(response.headers.get('content-length')) : NaN
        if (length > maxChars) return null
        const copy = response.clone()
        if (typeof copy.text !== 'function') return null
        text = await copy.text()
      } else if (typeof response.body === 'string') {
        text = response.body
      } else if (response.body && typeof response.body === 'object' && !isStream(response.body)) {
        return bodyHints(response.body)
      } else {
        return null
      }
      if (typeof text !== 'string' || text.length > maxChars) return null
      return bodyHints(JSON.parse(text))
    } catch (_) {
      return null // not JSON (an HTML ban page): the headers decide
    }
  }

  function isStream(body) {
    return typeof body.getReader === 'function' || typeof body.pipe === 'function'
  }

  /** Frees a response the caller will never see (a retried 429 or 5xx). */
  function discard(response) {
    try {
      const body = response && response.body
      if (body && typeof body.cancel === 'function' && !body.locked) {
        const p = body.cancel()
        if (p && typeof p.catch === 'function') p.catch(() => {})
      }
    } catch (_) { /* nothing to free */ }
  }

  // ------------------------------------------------------------------ transport failures

  /** Error codes meaning the request never reached the server (nothing was written). */
  const NOT_SENT_CODES = new Set([
    'ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EAI_NONAME', 'EAI_FAIL', 'ENETUNREACH',
    'EHOSTUNREACH', 'ENETDOWN', 'EHOSTDOWN', 'EADDRNOTAVAIL', 'UND_ERR_CONNECT_TIMEOUT',
    'ERR_TLS_CERT_ALTNAME_INVALID', 'CERT_HAS_EXPIRED', 'DEPTH_ZERO_SELF_SIGNED_CERT',
    'UNABLE_TO_VERIFY_LEAF_SIGNATURE', 'SELF_SIGNED_CERT_IN_CHAIN', 'ERR_INVALID_URL',
  ])

  /**
   * `'not_sent'` when the error proves the request never reached the server (connection
   * refused, DNS failure, connect timeout, TLS certificate rejected, invalid URL), otherwise
   * `'maybe_sent'`. An error may decide for itself with `error.ratelaneFailure`.
   */
  function classifyFailure(error) {
    let e = error
    for (let depth = 0; e && depth < 4; depth++) {
      if (e.ratelaneFailure === 'not_sent' || e.ratelaneFailure === 'maybe_sent') return e.ratelaneFailure
      if (typeof e.code === 'string' && NOT_SENT_CODES.has(e.code)) return 'not_sent'
      if (Array.isArray(e.errors) && e.errors.length > 0 && e.errors.every((x) => classifyFailure(x) === 'not_sent')) {
        return 'not_sent' // AggregateError of every address refused (happy eyeballs)
      }
      e = e.cause
    }
    return 'maybe_sent'
  }

  // ------------------------------------------------------------------ events

  /** A small event emitter (no Node `events` needed). Listener errors are rethrown async. */
  class Emitter {
    constructor() { this._listeners = new Map() }
    on(name, listener) {
      if (typeof listener !== 'function') {
        throw usage(InvalidArgumentError, 'invalid_argument', 'listener must be a function')
      }
      const list = this._listeners.get(name)
      if (list) list.push(listener)
      else this._listeners.set(name, [listener])
      return this
    }
    once(name, listener) {
      const wrapper = (...args) => { this.off(name, wrapper); listener.apply(this, args) }
      wrapper.listener = listener
      return this.on(name, wrapper)
    }
    off(name, listener) {
      const list = this._listeners.get(name)
      if (!list) return this
      const i = list.findIndex((l) => l === listener || l.listener === listener)
      if (i >= 0) list.splice(i, 1)
      if (list.length === 0) this._listeners.delete(name)
      return this
    }
    listenerCount(name) {
      const list = this._listeners.get(name)
      return list ? list.length : 0
    }
    emit(name, event) {
      const list = this._listeners.get(name)
      if (!list) return false
      for (const listener of list.slice()) {
        try {
          listener.call(this, event)
        } catch (error) {
          setTimeout(() => { throw error }, 0)
        }
      }
      return true
    }
  }

  // ------------------------------------------------------------------ the driver

  const EVENT_CALLBACKS = {
    onRateLimited: 'rateLimited',
    onBucketLearned: 'bucketLearned',
    onInvalidRequestWarning: 'invalidRequestWarning',
    onStoreUnavailable: 'storeUnavailable',
    onStoreRecovered: 'storeRecovered',
  }

  // ------------------------------------------------------------------ shared mode

  /** What the store's promise is replaced with when it rejects, times out or answers garbage. */
  const UNAVAILABLE = Object.freeze({ answer: 'unavailable' })
  const STORE_METHODS = ['coreSettings', 'bind', 'reserve', 'record', 'close']

  /**
   * Checks the `shared` option: a store of the interface in js/CONTRACT.md ("The driver's
   * store interface"). Caller misuse, so `invalid_config`.
   */
  function checkStore(store) {
    if (store === null || typeof store !== 'object') {
      throw badOption('shared must be a store object (e.g. a RedisStore), got ' + String(store))
    }
    const missing = STORE_METHODS.filter((m) => typeof store[m] !== 'function')
    if (missing.length > 0) {
      throw badOption(`shared must be a store with the methods ${STORE_METHODS.join(', ')}; missing: ${missing.join(', ')}`)
    }
    const t = store.timeout
    if (typeof t !== 'number' || !Number.isFinite(t) || t <= 0) {
      throw badOption(`the shared store's timeout must be a finite number of milliseconds > 0, got ${shown(t)}`)
    }
    const settings = store.coreSettings()
    if (settings === null || typeof settings !== 'object' || Array.isArray(settings)) {
      throw badOption("the shared store's coreSettings() must return the core's shared settings object")
    }
    return settings
  }

  /** Calls `f` and turns a synchronous throw into a rejected promise. */
  function attempt(f) {
    try {
      return Promise.resolve(f())
    } catch (error) {
      return Promise.reject(error)
    }
  }

  /**
   * The Promise driver: `await limiter.run(method, path, send)`. Each request waits until
   * the core says it may go, `send` performs it, and its response goes back to the core.
   */
  class RateLimiter extends Emitter {
    /**
     * @param options camelCase settings, durations in ms (see README); plus `identity` (the
     *   default token key), `shared` (a store: several processes share the limits through it,
     *   js/CONTRACT.md "Shared mode") and the callbacks `onRateLimited`, `onBucketLearned`,
     *   `onInvalidRequestWarning`, `onStoreUnavailable`, `onStoreRecovered`.
     */
    constructor(options) {
      super()
      const opts = options === undefined || options === null ? {} : options
      const coreOptions = {}
      let store = null
      if (typeof opts === 'object' && !Array.isArray(opts)) {
        for (const name of Object.keys(opts)) {
          if (Object.prototype.hasOwnProperty.call(EVENT_CALLBACKS, name)) {
            if (opts[name] !== undefined) this.on(EVENT_CALLBACKS[name], opts[name])
          } else if (name === 'shared') {
            if (opts.shared !== undefined && opts.shared !== null) store = opts.shared
          } else {
            coreOptions[name] = opts[name]
          }
        }
      }
      const config = toCoreConfig(typeof opts === 'object' ? coreOptions : opts)
      if (opts.identity !== undefined && typeof opts.identity !== 'string') {
        throw badOption('identity must be a string')
      }
      if (store !== null) config.shared = checkStore(store)
      this._identity = opts.identity
      try {
        this._core = new core.Limiter(JSON.stringify(config))
      } catch (error) {
        throw fromCoreError(error)
      }
      /** The shared store, or null. */
      this._store = store
      /** id -> answer function of each reservation not yet answered. */
      this._asking = new Map()
      this._askedWaiters = []
      this._storeClosing = null
      if (store !== null) store.bind(JSON.parse(this._core.configJson()).shared)
      /** id -> entry of each request not yet settled. */
      this._entries = new Map()
      // Whether the profile reads the body of an answer with a status, asked of the core once
      // per status (at most 900): the profile never changes, and a crossing costs more than
      // the rest of the question.
      this._readsBody = new Map()
      /** Where the core writes each drain's pairs (`drainInto`), 16 outputs at a time. */
      this._drained = new Float64Array(32)
      this._timer = null
      this._timerAt = null
      this._timerRef = true
      this._pumping = false
      this._again = false
      this._closeWaiters = []
      /** When this turn's first send started (ms, `clock()`), or null: see START_BUDGET_MS. */
      this._turnStart = null
      /**
       * Ids whose `send` output came after this turn's budget, in order: started on the next
       * turn. A Set, so that an abort takes its id out (see `_abort`).
       */
      this._deferredStarts = null
    }

    /** Requests waiting to be sent. */
    get queued() { return this._core.queued }
    /** Requests sent and not answered. */
    get inFlight() { return this._core.inFlight }
    /** Whether `close()` was called. */
    get closed() { return this._core.isClosed }
    /** The core configuration in use (JSON form, ns). */
    get config() { return JSON.parse(this._core.configJson()) }

    /**
     * How long a request enqueued now would wait before being sent, in ms (0: at once),
     * from what the limiter knows.
     */
    predictWait(method, path, options) {
      const now = nowNs()
      const opts = options === undefined || options === null ? {} : options
      checkRunOptions(opts)
      const spec = this._spec(method, path, opts, now)
      let at
      try {
        at = this._core.predictParts(now, requestParts(spec))
      } catch (error) {
        throw fromCoreError(error)
      }
      return Math.max(0, at - now) / 1e6
    }

    /**
     * Runs `send` when the rate limits allow, and resolves with its response.
     *
     * `send({ signal, attempt })` performs the request and returns a fetch `Response` or any
     * object with `status` and `headers`; pass `signal` to `fetch` so a cancellation aborts
     * it. It may be called again (a retry after a 429, a 5xx or a transport failure).
     *
     * Options: `signal` (AbortSignal: cancels while queued or in flight; rejects with its
     * reason), `deadline` (ms from now: fail with DeadlineExceededError rather than send
     * later), `deferAfter` (ms: when the predicted wait is longer, fail at once with
     * DeferredError, whose `retryAt`/`retryAtMs`/`retryAtDate` say when to run it again; default:
     * the limiter's `deferAfter` option), `major`, `identity`, `priority`, `idempotent`, `globalExempt`, `bodyKeys` (the
     * top-level keys of the JSON body, or the body object itself: the profile derives the
     * request's sub-limit class from them, e.g. a Discord channel edit of `name` or `topic`)
     * and `subLimit` (the class itself): a sub-limit 429 holds only requests of its class.
     * `costs` (`{ tokens: 1200 }`): the estimated cost per dimension beyond the one request; the
     * request waits until each dimension has room for it, and its answer's JSON `usage` (read
     * from a clone) settles the estimate; an estimate above a dimension's whole limit rejects
     * with InsufficientCapacityError. `model`: the LLM model it asks for, which keys an LLM
     * API's per-model budgets (`readLlmRequest(body)` reads it and a token estimate from an
     * OpenAI or Anthropic body).
     *
     * Rejects with a RateLimitError subclass when the core gives up on the request.
     */
    run(method, path, send, options) {
      return new Promise((resolve, reject) => {
        const opts = options === undefined || options === null ? {} : options
        if (typeof send !== 'function') {
          throw usage(InvalidArgumentError, 'invalid_argument', 'send must be a function returning a response')
        }
        checkRunOptions(opts)
        const signal = opts.signal
        if (signal && signal.aborted) {
          reject(signal.reason)
          return
        }
        const now = nowNs()
        let id
        let spec
        if (opts.major == null && opts.priority === undefined && opts.idempotent === undefined &&
            opts.globalExempt === undefined && opts.deadline == null && opts.deferAfter == null && opts.subLimit == null &&
            opts.bodyKeys == null && opts.costs == null && opts.model == null) {
          // Nothing but method, path and identity: no spec object to build.
          spec = this._methodPath(method, path)
          const identity = opts.identity !== undefined ? opts.identity : this._identity
          try {
            id = this._core.enqueueParts(now, spec.method, spec.path, identity)
          } catch (error) {
            throw fromCoreError(error)
          }
        } else {
          spec = this._spec(method, path, opts, now)
          try {
            id = this._core.enqueueParts(now, ...requestParts(spec))
          } catch (error) {
            throw fromCoreError(error)
          }
        }
        const entry = {
          id,
          method: spec.method,
          path: spec.path,
          // Its answers' bodies are read for `usage`, which settles the estimated costs.
          costs: spec.costs !== undefined && Object.keys(spec.costs).length > 0,
          send,
          resolve,
          reject,
          signal: signal || null,
          onAbort: null,
          attempt: 0,
          attemptController: null,
          lastResponse: undefined,
          lastError: undefined,
        }
        if (signal) {
          entry.onAbort = () => this._abort(entry)
          listenForAbort(signal, entry)
        }
        this._entries.set(id, entry)
        this._pump()
      })
    }

    /**
     * What this limiter learned, as JSON text to keep across a restart (format
     * "ratelane.snapshot", versioned): the routes found to share a bucket, learned windows,
     * global and host-wide pauses still running, the invalid-request budget spent. Instants
     * are stored on the wall clock (`Date.now()`): `performance.now()` restarts with the process.
     */
    snapshot() {
      return this._core.snapshot(nowNs(), Date.now())
    }

    /**
     * Restores `snapshot()` text (usually of the previous run) before the first request, so
     * routes known to share a bucket share one pioneer and running pauses are honoured.
     * Throws SnapshotForeignError, SnapshotVersionError, SnapshotMalformedError,
     * LimiterBusyError (requests are queued or in flight), LimiterClosedError, or
     * InvalidArgumentError when `snapshot` is not a string.
     */
    restore(snapshot) {
      try {
        this._core.restore(nowNs(), Date.now(), snapshot)
      } catch (error) {
        throw fromCoreError(error)
      }
      this._pump()
    }

    /**
     * Closes the limiter: every queued request rejects with ClosedError and new ones with
     * LimiterClosedError. Resolves once the requests in flight have settled; in shared mode
     * also once every reservation was answered (each within the store's timeout) and the
     * store was flushed and closed. Never rejects.
     */
    close() {
      if (!this._core.isClosed) {
        this._core.close(nowNs())
        // Sends the core let go but this driver has not started yet were never sent: they end
        // like the queued ones (ClosedError), and nothing starts after close.
        const deferred = this._deferredStarts
        this._deferredStarts = null
        if (deferred !== null) {
          const now = nowNs()
          for (const id of deferred) {
            if (!this._entries.has(id)) continue
            try {
              this._core.handleFailure(now, id, 'not_sent')
            } catch (_) { /* it ended meanwhile */ }
          }
        }
        this._pump()
      }
      let settled
      if (this._entries.size === 0) {
        this._clearTimer()
        settled = Promise.resolve()
      } else {
        settled = new Promise((resolve) => { this._closeWaiters.push(resolve) })
      }
      if (this._store === null) return settled
      if (this._storeClosing === null) {
        const store = this._store
        this._storeClosing = settled
          .then(() => this._asked())
          .then(() => (typeof store.flush === 'function' ? attempt(() => store.flush()) : undefined))
          .catch(() => {})
          .then(() => attempt(() => store.close()))
          .catch(() => {}) // a store failing to close is the store's business, never the caller's
      }
      return this._storeClosing
    }

    // -------------------------------------------------------------- internals

    /** `{ method, path }` checked, a URL-like path as its pathname and search. */
    _methodPath(method, path) {
      if (typeof method !== 'string') {
        throw usage(InvalidArgumentError, 'invalid_argument', 'method must be a string')
      }
      let p = path
      if (p && typeof p === 'object' && typeof p.pathname === 'string') p = p.pathname + (p.search || '')
      if (typeof p !== 'string') {
        throw usage(InvalidArgumentError, 'invalid_argument', 'path must be a string')
      }
      return { method, path: p }
    }

    _spec(method, path, opts, now) {
      const spec = this._methodPath(method, path)
      if (opts.major !== undefined && opts.major !== null) spec.major = opts.major
      const identity = opts.identity !== undefined ? opts.identity : this._identity
      if (identity !== undefined && identity !== null) spec.identity = identity
      if (opts.priority !== undefined) spec.priority = opts.priority
      if (opts.idempotent !== undefined) spec.idempotent = opts.idempotent
      if (opts.globalExempt !== undefined) spec.globalExempt = opts.globalExempt
      if (opts.subLimit !== undefined && opts.subLimit !== null) spec.subLimit = opts.subLimit
      if (opts.bodyKeys !== undefined && opts.bodyKeys !== null) spec.bodyKeys = bodyKeys(opts.bodyKeys)
      // Checked by the core module (InvalidArgumentError naming request.costs, or
      // InvalidRequestError for a name the core refuses).
      if (opts.costs !== undefined && opts.costs !== null) spec.costs = opts.costs
      if (opts.model !== undefined && opts.model !== null) spec.model = opts.model
      if (opts.deadline !== undefined && opts.deadline !== null) {
        if (typeof opts.deadline !== 'number' || !(opts.deadline >= 0)) {
          throw usage(InvalidArgumentError, 'invalid_argument', 'deadline must be a number of ms >= 0')
        }
        spec.deadlineNs = Math.min(Number.MAX_SAFE_INTEGER, now + Math.round(Math.min(opts.deadline, 9e9) * 1e6))
      }
      if (opts.deferAfter !== undefined && opts.deferAfter !== null) {
        if (typeof opts.deferAfter !== 'number' || !Number.isFinite(opts.deferAfter) || !(opts.deferAfter >= 0)) {
          throw usage(InvalidArgumentError, 'invalid_argument', `deferAfter must be a finite number of ms >= 0, got ${shown(opts.deferAfter)}`)
        }
        spec.deferAfterNs = Math.min(Number.MAX_SAFE_INTEGER, Math.round(Math.min(opts.deferAfter, 9e9) * 1e6))
      }
      return spec
    }

    /** `readsBody(status)` of the core, kept per status. */
    _readsBodyOf(status) {
      let reads = this._readsBody.get(status)
      if (reads === undefined) {
        reads = this._core.readsBody(status)
        this._readsBody.set(status, reads)
      }
      return reads
    }

    /** Drains the core after an input (the drain invariant) and acts on each output. */
    _pump() {
      if (this._pumping) {
        this._again = true
        return
      }
      this._pumping = true
      try {
        do {
          this._again = false
          // The packed drain carries send, wait_until and idle as numbers (js/CONTRACT.md,
          // "The positional surface"), written into `_drained`; kind 3: the core holds an
          // output, taken as its serde form, and the drain goes on, as it does when the
          // buffer filled (its last pair a send).
          const packed = this._drained
          let more
          do {
            more = false
            const n = this._core.drainInto(packed)
            for (let i = 0; i < n; i += 2) {
              const kind = packed[i]
              if (kind === PACKED_SEND) {
                this._start(packed[i + 1])
              } else if (kind === PACKED_WAIT_UNTIL) {
                this._arm(packed[i + 1])
              } else if (kind === PACKED_IDLE) {
                this._clearTimer()
              } else {
                this._act(outputObject(this._core.takeHeld()))
                more = true
              }
            }
            if (packed[n - 2] === PACKED_SEND) more = true
          } while (more)
        } while (this._again)
      } finally {
        this._pumping = false
      }
      this._refTimer()
      if (this._closeWaiters.length > 0 && this._entries.size === 0) {
        this._clearTimer()
        const waiters = this._closeWaiters
        this._closeWaiters = []
        for (const w of waiters) w()
      }
    }

    _act(output) {
      switch (output.type) {
        case 'send':
          this._start(output.id)
          break
        case 'fail':
          this._fail(output)
          break
        case 'wait_until':
          this._arm(output.atNs)
          break
        case 'idle':
          this._clearTimer()
          break
        case 'rate_limited': {
          const entry = this._entries.get(output.id)
          this.emit('rateLimited', {
            id: output.id,
            method: entry ? entry.method : undefined,
            path: entry ? entry.path : undefined,
            scope: output.scope,
            retryAfter: output.retryAfterNs / 1e6,
          })
          break
        }
        case 'bucket_learned':
          this.emit('bucketLearned', { route: output.route, bucket: output.bucket })
          break
        case 'invalid_request_warning':
          this.emit('invalidRequestWarning', { count: output.count, limit: output.limit })
          break
        case 'reserve':
          this._reserve(output.id, output.reservation)
          break
        case 'share':
          this._share(output.update)
          break
        case 'store_unavailable':
          this.emit('storeUnavailable', { id: output.id, retryAt: output.retryAtNs / 1e6 })
          break
        case 'store_recovered':
          this.emit('storeRecovered', {})
          break
        default: {
          const error = new Error(`ratelane: the core emitted an output the driver does not know: ${JSON.stringify(output)}`)
          setTimeout(() => { throw error }, 0)
        }
      }
    }

    /** Starts the send of `id` now, or on the next turn once this turn spent its budget. */
    _start(id) {
      if (this._deferredStarts !== null) {
        this._deferredStarts.add(id)
        return
      }
      if (nextTurn === null) {
        this._startNow(id)
        return
      }
      const t = clock()
      if (this._turnStart === null) {
        this._turnStart = t
        nextTurn(() => this._nextTurn())
      } else if (t - this._turnStart > START_BUDGET_MS) {
        this._deferredStarts = new Set([id])
        return
      }
      this._startNow(id)
    }

    /** A new turn: its budget is fresh, and the sends deferred by the last one start first. */
    _nextTurn() {
      this._turnStart = null
      const deferred = this._deferredStarts
      this._deferredStarts = null
      if (deferred !== null) for (const id of deferred) this._start(id)
    }

    _startNow(id) {
      const entry = this._entries.get(id)
      if (!entry) return
      entry.attempt += 1
      // One token per attempt: it tells a late answer of an earlier attempt from the current
      // one, and holds the attempt's AbortController, made only when `send` reads `signal`
      // (an AbortController and its signal cost microseconds; a send that never looks at the
      // signal cannot observe whether one exists). It also names its limiter and entry, for the
      // report that the transport wrote it.
      const controller = { abortController: null, aborted: false, reason: undefined, limiter: this, entry }
      entry.attemptController = controller
      const context = {
        attempt: entry.attempt,
        get signal() {
          if (controller.abortController === null) {
            if (typeof AbortController !== 'function') return undefined
            controller.abortController = new AbortController()
            if (controller.aborted) controller.abortController.abort(controller.reason)
          }
          return controller.abortController.signal
        },
      }
      let pending
      try {
        pending = Promise.resolve(writes === null
          ? entry.send(context)
          : writes.during(controller, () => entry.send(context)))
      } catch (error) {
        // It threw before returning: nothing was sent.
        const e = error !== null && typeof error === 'object' ? error : new Error(String(error))
        pending = Promise.reject(Object.assign(e, { ratelaneFailure: e.ratelaneFailure || 'not_sent' }))
      }
      pending.then(
        (response) => this._onResponse(entry, controller, response),
        (error) => this._onError(entry, controller, error),
      ).catch((error) => {
        // Whatever else went wrong reading this answer ends this request, not the process.
        if (this._entries.get(entry.id) !== entry) throw error
        this._settleMisuse(entry, fromCoreError(error))
      })
    }

    /** The transport wrote the current attempt of `entry`. */
    _written(entry, controller) {
      if (!this._current(entry, controller)) return
      try {
        this._core.handleWritten(nowNs(), entry.id)
      } catch (_) { /* it ended meanwhile: nothing to count */ }
    }

    _current(entry, controller) {
      return this._entries.get(entry.id) === entry && entry.attemptController === controller
    }

    /**
     * What `send` resolved to, checked once before anything reads it: `null` when it is a
     * response whose `status` the core takes (an integer in 100..=999: `readsBody` checks it
     * with the core's rule, `ratelane::Response::status_of`), else the InvalidArgumentError
     * that ends the request (NaN, -1, 2**60, 200.5, a string: never an uncaught exception,
     * never a promise left pending).
     */
    _responseMisuse(response) {
      if (!response || typeof response.status !== 'number') {
        return usage(InvalidArgumentError, 'invalid_argument',
          'send must resolve to a response with a numeric status (e.g. a fetch Response)')
      }
      try {
        this._readsBodyOf(response.status)
      } catch (error) {
        return fromCoreError(error)
      }
      return null
    }

    async _onResponse(entry, controller, response) {
      if (!this._current(entry, controller)) return
      const misuse = this._responseMisuse(response)
      if (misuse !== null) {
        this._settleMisuse(entry, misuse)
        return
      }
      let lines
      let pairs = null
      const wallClockMs = Date.now()
      try {
        lines = headerLines(response.headers)
        if (lines === null) pairs = headerPairs(response.headers)
      } catch (error) {
        this._settleMisuse(entry, usage(InvalidArgumentError, 'invalid_argument', `the response's headers could not be read: ${error}`))
        return
      }
      let hints = null
      // The body is read where the profile reads it (a 429's JSON, GitHub's 403 messages,
      // Shopify's GraphQL cost in every answer): the core says which statuses. A request with
      // costs has every JSON answer read for its `usage` (the actual costs, which settle the
      // estimates), from a clone as a 429's; nothing else of such a body is passed.
      if (response.status === 429 || (this._readsBodyOf(response.status) && mayBeJson(response))) {
        hints = await readHints(response, entry.costs ? MAX_USAGE_BODY_CHARS : MAX_BODY_CHARS)
        if (!this._current(entry, controller)) return
      } else if (entry.costs && mayBeJson(response)) {
        const read = await readHints(response, MAX_USAGE_BODY_CHARS)
        if (!this._current(entry, controller)) return
        hints = read && read.usage !== undefined ? { usage: read.usage } : null
      }
      entry.attemptController = null
      let disposition
      try {
        disposition = respond(this._core, nowNs(), entry.id, response.status,
          lines !== null ? lines : flatHeaders(pairs), wallClockMs, hints)
      } catch (error) {
        this._settleMisuse(entry, fromCoreError(error))
        return
      }
      if (disposition === 'complete') {
        this._settle(entry)
        entry.resolve(response)
      } else {
        // 'retry': the core sends it again later; 'failed': its fail output follows.
        if (entry.lastResponse !== undefined && entry.lastResponse !== response) discard(entry.lastResponse)
        entry.lastResponse = response
        if (disposition === 'retry') discard(response)
      }
      this._pump()
    }

    _onError(entry, controller, error) {
      if (!this._current(entry, controller)) return
      entry.attemptController = null
      entry.lastError = error
      let disposition
      try {
        disposition = this._core.handleFailure(nowNs(), entry.id, classifyFailure(error))
      } catch (e) {
        this._settleMisuse(entry, fromCoreError(e))
        return
      }
      if (disposition === 'complete') {
        this._settle(entry)
        entry.reject(error)
      }
      this._pump()
    }

    /** A request the caller's code or the core refused: end it in the core, reject it. */
    _settleMisuse(entry, error) {
      entry.attemptController = null
      try {
        this._core.cancel(nowNs(), entry.id)
      } catch (_) { /* already ended in the core */ }
      this._settle(entry)
      entry.reject(error)
      this._pump()
    }

    _fail(output) {
      const entry = this._entries.get(output.id)
      if (!entry) return
      const cls = FAIL_CLASSES[output.code]
      const now = nowNs()
      const details = {
        method: entry.method,
        path: entry.path,
        attempts: output.attempts,
        response: entry.lastResponse,
        cause: entry.lastError,
      }
      if (output.predictedWaitNs !== undefined) details.predictedWait = output.predictedWaitNs / 1e6
      if (output.code === 'deadline_exceeded') {
        const at = output.predictedSendAtNs
        details.predictedSendAt = typeof at === 'number' ? at / 1e6 : null
        details.predictedWait = typeof at === 'number' ? Math.max(0, at - now) / 1e6 : null
      } else if (output.code === 'deferred') {
        // The core's retry time is on the performance.now() clock; the wall clock's is as far ahead.
        const ahead = Math.max(0, output.retryAtNs - now) / 1e6
        details.retryAt = output.retryAtNs / 1e6
        details.retryAfter = ahead
        details.retryAtMs = Math.ceil(Date.now() + ahead) // whole ms, never before the prediction
      } else if (output.code === 'insufficient_capacity') {
        details.dimension = output.dimension
        details.cost = output.cost
        details.limit = output.limit
      }
      this._settle(entry)
      entry.reject(new cls(output.code, output.message, details))
    }

    /** The caller's AbortSignal fired: the request leaves the core (its slot comes back if queued). */
    _abort(entry) {
      if (this._entries.get(entry.id) !== entry) return
      const controller = entry.attemptController
      const now = nowNs()
      if (this._deferredStarts !== null && this._deferredStarts.delete(entry.id)) {
        // Its send never started: the core takes it back as not sent (its global token and
        // bucket slot return, where a cancel in flight would keep them as a request that may
        // have reached the server), then drops it from the queue.
        try {
          this._core.handleFailure(now, entry.id, 'not_sent')
        } catch (_) { /* it ended in the same tick */ }
      }
      try {
        this._core.cancel(now, entry.id)
      } catch (_) { /* it ended in the same tick */ }
      this._settle(entry)
      if (controller) {
        // A signal already handed out aborts now; one asked for later comes out aborted.
        controller.aborted = true
        controller.reason = entry.signal.reason
        if (controller.abortController) controller.abortController.abort(controller.reason)
      }
      entry.reject(entry.signal.reason)
      this._pump()
    }

    _settle(entry) {
      this._entries.delete(entry.id)
      entry.attemptController = null
      if (entry.signal && entry.onAbort) stopListening(entry.signal, entry)
    }

    // -------------------------------------------------------------- shared mode

    /**
     * Asks the store; its answer, or `unavailable` after the store's timeout (or when it
     * rejects or answers something the core does not take), goes to the core exactly once.
     * A later answer is ignored.
     */
    _reserve(id, reservation) {
      const store = this._store
      if (store === null) return
      let answered = false
      let timer = null
      const answer = (value) => {
        if (answered) return
        answered = true
        if (timer !== null) clearTimeout(timer)
        this._asking.delete(id)
        const now = nowNs()
        try {
          answerReservation(this._core, now, id, value)
        } catch (error) {
          // An id that ended meanwhile (unknown_request, invalid_state) needs no answer; any
          // other refusal is an answer the core does not take (the store's bug), which counts
          // as no answer.
          const code = error && error.code
          if (code !== 'unknown_request' && code !== 'invalid_state' && value !== UNAVAILABLE) {
            try {
              answerReservation(this._core, now, id, UNAVAILABLE)
            } catch (_) { /* ended meanwhile */ }
          }
        }
        this._pump()
        if (this._asking.size === 0 && this._askedWaiters.length > 0) {
          const waiters = this._askedWaiters
          this._askedWaiters = []
          for (const w of waiters) w()
        }
      }
      this._asking.set(id, answer)
      timer = setTimeout(() => answer(UNAVAILABLE), Math.min(store.timeout, MAX_TIMER_MS))
      attempt(() => store.reserve(reservation)).then(
        (value) => answer(value !== null && typeof value === 'object' ? value : UNAVAILABLE),
        () => answer(UNAVAILABLE),
      )
    }

    /** A shared update: fire-and-forget. A store that throws loses the update, nothing else. */
    _share(update) {
      if (this._store === null) return
      try {
        const p = this._store.record(update)
        if (p && typeof p.catch === 'function') p.catch(() => {})
      } catch (_) { /* dropped */ }
    }

    /** Resolves once every reservation asked has been answered. */
    _asked() {
      if (this._asking.size === 0) return Promise.resolve()
      return new Promise((resolve) => { this._askedWaiters.push(resolve) })
    }

    // -------------------------------------------------------------- the one timer

    _arm(atNs) {
      if (this._timer !== null && this._timerAt === atNs) return // same deadline: keep it
      this._clearTimer()
      const delay = Math.min(MAX_TIMER_MS, Math.max(0, Math.ceil((atNs - nowNs()) / 1e6)))
      this._timerAt = atNs
      this._timerRef = true
      this._timer = setTimeout(() => {
        this._timer = null
        this._timerAt = null
        this._core.handleTimeout(Math.max(atNs, nowNs()))
        this._pump()
      }, delay)
    }

    _clearTimer() {
      if (this._timer !== null) clearTimeout(this._timer)
      this._timer = null
      this._timerAt = null
    }

    /** A queued request keeps the process alive; a timer for housekeeping only does not. */
    _refTimer() {
      const t = this._timer
      if (t === null || typeof t !== 'object' || typeof t.unref !== 'function') return
      const wanted = this._core.queued > 0
      if (wanted !== this._timerRef) {
        if (wanted) t.ref()
        else t.unref()
        this._timerRef = wanted
      }
    }
  }

  // ------------------------------------------------------------------ metrics (OpenTelemetry)

  /**
   * Bucket boundaries (seconds) advised for `ratelane.wait.duration`: from "sent at once" to
   * the minutes a global pause or an invalid-request stop can hold a request.
   */
  const WAIT_BOUNDARIES = Object.freeze([0, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300])

  /**
   * The ratelane instruments on one OpenTelemetry `Meter` (from `@opentelemetry/api`, an
   * optional peer dependency: pass `metrics.getMeter('ratelane')`), created once; `attach`
   * any number of `RateLimiter`s. The names, units and attributes are those of the Python
   * `ratelane.otel` (README, "Metrics"). Every value comes from the core: its outputs, the
   * dispositions it returns and its getters, recorded at the `nowNs` of the inputs.
   */
  class Metrics {
    constructor(meter) {
      if (meter === null || typeof meter !== 'object' || typeof meter.createCounter !== 'function' ||
          typeof meter.createHistogram !== 'function' || typeof meter.createObservableGauge !== 'function') {
        throw usage(InvalidArgumentError, 'invalid_argument',
          "Metrics needs an OpenTelemetry Meter: metrics.getMeter('ratelane') of @opentelemetry/api")
      }
      this._attached = []
      this.requests = meter.createCounter('ratelane.requests', {
        unit: '{request}',
        description: "The core's decisions per request, by ratelane.outcome (sent, answered, retried, failed with error.type, cancelled)",
      })
      this.wait = meter.createHistogram('ratelane.wait.duration', {
        unit: 's',
        description: 'Time a request waited in the limiter before each send',
        advice: { explicitBucketBoundaries: WAIT_BOUNDARIES.slice() },
      })
      this.rateLimited = meter.createCounter('ratelane.rate_limited', {
        unit: '{response}', description: '429 answers, by ratelane.scope',
      })
      this.storeUnavailable = meter.createCounter('ratelane.store.unavailable', {
        unit: '{event}', description: 'Shared mode: reservations the store did not answer (one per outage step)',
      })
      this.storeRecovered = meter.createCounter('ratelane.store.recovered', {
        unit: '{event}', description: 'Shared mode: the store answered again',
      })
      const gauge = (name, unit, description, read) => {
        meter.createObservableGauge(name, { unit, description }).addCallback((result) => {
          for (const { limiter, recorder } of this._attached) result.observe(read(limiter, recorder), recorder.attributes)
        })
      }
      gauge('ratelane.queue.depth', '{request}', 'Requests waiting to be sent (queued, or waiting for a reservation)',
        (l, r) => r.inner.queued + r.inner.reserving)
      gauge('ratelane.requests.in_flight', '{request}', 'Requests sent and not yet answered', (l, r) => r.inner.inFlight)
      gauge('ratelane.invalid_requests.used', '{response}',
        'The invalid-request budget used: 401, 403 and non-shared 429 answers within the window',
        (l, r) => r.inner.invalidRequests(Math.max(r.now, nowNs())))
    }

    /**
     * Records `limiter`'s decisions from now on (attach before its first request: one enqueued
     * before has no wait recorded). `options.name` adds the attribute `ratelane.limiter`.
     */
    attach(limiter, options) {
      if (!(limiter instanceof RateLimiter)) {
        throw usage(InvalidArgumentError, 'invalid_argument', 'attach takes a RateLimiter')
      }
      if (limiter._core instanceof MeteredCore) {
        throw usage(InvalidArgumentError, 'invalid_argument', 'this RateLimiter is already attached to a Metrics')
      }
      const name = options && options.name
      const attributes = name === undefined || name === null ? {} : { 'ratelane.limiter': String(name) }
      const recorder = new MeteredCore(limiter._core, this, attributes)
      limiter._core = recorder
      this._attached.push({ limiter, recorder })
      return this
    }

    /** Stops recording `limiter`; its gauges are no longer reported. */
    detach(limiter) {
      const i = this._attached.findIndex((a) => a.limiter === limiter)
      if (i < 0) return this
      const { recorder } = this._attached[i]
      this._attached.splice(i, 1)
      if (limiter._core === recorder) limiter._core = recorder.inner
      return this
    }
  }

  /** `new Metrics(meter).attach(limiter, options)`; returns the Metrics. */
  function instrument(limiter, meter, options) {
    return new Metrics(meter).attach(limiter, options)
  }

  /**
   * Stands in for a driver's core (the CONTRACT.md surface): passes every call through and
   * records what the core decided, at the `nowNs` of the inputs. Only an attached limiter
   * pays for it.
   */
  class MeteredCore {
    constructor(inner, metrics, attributes) {
      this.inner = inner
      this.metrics = metrics
      this.attributes = attributes
      this.now = 0
      /** request id -> when it last became ready to wait (enqueued, or retried). */
      this.since = new Map()
      const outcome = (o) => Object.assign({}, attributes, { 'ratelane.outcome': o })
      this.sentAttrs = outcome('sent')
      this.answeredAttrs = outcome('answered')
      this.retriedAttrs = outcome('retried')
      this.cancelledAttrs = outcome('cancelled')
    }

    _at(nowNs) {
      const n = Number(nowNs)
      if (n > this.now) this.now = n
      return this.now
    }

    _disposition(nowNs, id, disposition) {
      const now = this._at(nowNs)
      if (disposition === 'complete') {
        this.since.delete(id)
        this.metrics.requests.add(1, this.answeredAttrs)
      } else if (disposition === 'retry') {
        this.since.set(id, now)
        this.metrics.requests.add(1, this.retriedAttrs)
      } // 'failed': its fail output is counted when drained
      return disposition
    }

    _sent(id) {
      this.metrics.requests.add(1, this.sentAttrs)
      const since = this.since.get(id)
      if (since !== undefined) {
        this.since.delete(id)
        this.metrics.wait.record((this.now - since) / 1e9, this.attributes)
      }
    }

    _record(output) {
      switch (output.type) {
        case 'send':
          this._sent(output.id)
          break
        case 'fail':
          this.since.delete(output.id)
          this.metrics.requests.add(1, Object.assign({}, this.attributes, { 'ratelane.outcome': 'failed', 'error.type': output.code }))
          break
        case 'rate_limited':
          this.metrics.rateLimited.add(1, Object.assign({}, this.attributes, { 'ratelane.scope': output.scope }))
          break
        case 'store_unavailable':
          this.metrics.storeUnavailable.add(1, this.attributes)
          break
        case 'store_recovered':
          this.metrics.storeRecovered.add(1, this.attributes)
          break
        default:
      }
    }

    // inputs
    enqueueParts(nowNs, ...parts) {
      const id = this.inner.enqueueParts(nowNs, ...parts)
      this.since.set(id, this._at(nowNs))
      return id
    }
    respond(nowNs, id, ...parts) {
      return this._disposition(nowNs, id, this.inner.respond(nowNs, id, ...parts))
    }
    handleFailure(nowNs, id, failure) {
      return this._disposition(nowNs, id, this.inner.handleFailure(nowNs, id, failure))
    }
    cancel(nowNs, id) {
      this.inner.cancel(nowNs, id)
      this._at(nowNs)
      this.since.delete(id)
      this.metrics.requests.add(1, this.cancelledAttrs)
    }
    handleWritten(nowNs, id) { this.inner.handleWritten(nowNs, id); this._at(nowNs) }
    handleTimeout(nowNs) { this.inner.handleTimeout(nowNs); this._at(nowNs) }
    answerReservation(nowNs, id, ...parts) { this.inner.answerReservation(nowNs, id, ...parts); this._at(nowNs) }
    close(nowNs) { this.inner.close(nowNs); this._at(nowNs) }
    restore(nowNs, wallClockMs, snapshot) { this.inner.restore(nowNs, wallClockMs, snapshot); this._at(nowNs) }

    // outputs
    drainInto(buf, one) {
      const n = this.inner.drainInto(buf, one)
      for (let i = 0; i < n; i += 2) {
        if (buf[i] === PACKED_SEND) this._sent(buf[i + 1])
      }
      return n
    }
    takeHeld() {
      const text = this.inner.takeHeld()
      if (typeof text === 'string') this._record(outputObject(text))
      return text
    }

    // reads
    predictParts(nowNs, parts) { return this.inner.predictParts(nowNs, parts) }
    snapshot(nowNs, wallClockMs) { return this.inner.snapshot(nowNs, wallClockMs) }
    readsBody(status) { return this.inner.readsBody(status) }
    configJson() { return this.inner.configJson() }
    invalidRequests(nowNs) { return this.inner.invalidRequests(nowNs) }
    get queued() { return this.inner.queued }
    get inFlight() { return this.inner.inFlight }
    get reserving() { return this.inner.reserving }
    get buckets() { return this.inner.buckets }
    get isClosed() { return this.inner.isClosed }
  }

  return {
    RateLimiter,
    RatelaneError,
    UsageError,
    UnknownRequestError,
    InvalidStateError,
    InvalidConfigError,
    InvalidRequestError,
    LimiterClosedError,
    LimiterBusyError,
    SnapshotError,
    SnapshotForeignError,
    SnapshotVersionError,
    SnapshotMalformedError,
    InvalidArgumentError,
    SimulationContractError,
    InsufficientCapacityError,
    RateLimitError,
    DeadlineExceededError,
    MaxWaitExceededError,
    DeferredError,
    RetriesExhaustedError,
    MaybeSentError,
    NetworkError,
    UnauthorizedError,
    ClosedError,
    FAIL_CLASSES: Object.freeze(Object.assign({}, FAIL_CLASSES)),
    USAGE_CLASSES: Object.freeze(Object.assign({}, USAGE_CLASSES)),
    fromCoreError,
    toCoreConfig,
    classifyFailure,
    headerPairs,
    Metrics,
    instrument,
    Limiter,
    SimServer,
    Simulation,
    outputObject,
    GcraStore: core.GcraStore,
    LeakyBucketStore: core.LeakyBucketStore,
    FixedWindowStore: core.FixedWindowStore,
    FAIL_CODES: core.FAIL_CODES,
    ERROR_CODES: core.ERROR_CODES,
    readLlmRequest,
  }
}
