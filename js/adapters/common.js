// What the adapters of js/adapters/ share (fetch, undici, discord.js, Octokit): the checks of
// their options, the limiter they run on, the token estimate of a request body, and the 429
// `Response` a refusal becomes.
//
// Like js/driver.js, this file declares one factory and nothing else at top level: no
// `require`, `import` or `export`, no Node-only API. Each package's build concatenates it with
// the adapters it ships and appends one export line (js/README.md, "The adapters").
//
// Adapters translate a library's calls into the driver's (`RateLimiter.run`) and nothing more:
// which request goes when, what a 429 means and whether to retry are the core's decisions.

/* eslint-disable no-unused-vars */
function createAdapterCommon(ratelane) {
  'use strict'

  const { RateLimiter, InvalidArgumentError } = ratelane

  function argumentError(message) {
    return new InvalidArgumentError('invalid_argument', message)
  }

  /** How a JS value's type reads in a message (`a string ("30000")`, `an object`, `5`). */
  function shown(value) {
    if (value === null) return 'null'
    if (typeof value === 'number' || typeof value === 'boolean') return String(value)
    if (typeof value === 'string') return `a string (${JSON.stringify(value.length > 40 ? value.slice(0, 40) + '...' : value)})`
    if (Array.isArray(value)) return 'an array'
    return typeof value === 'object' ? 'an object' : `a ${typeof value}`
  }

  const TYPES = {
    function: ['a function', (v) => typeof v === 'function'],
    string: ['a string', (v) => typeof v === 'string'],
    boolean: ['a boolean', (v) => typeof v === 'boolean'],
    number: ['a number', (v) => typeof v === 'number' && !Number.isNaN(v)],
    object: ['an object', (v) => typeof v === 'object' && !Array.isArray(v)],
    strings: ['a string or an array of strings', (v) => typeof v === 'string' || (Array.isArray(v) && v.every((s) => typeof s === 'string'))],
  }

  /**
   * Checks an adapter's `options` against `allowed` (name -> a key of TYPES, or
   * `[description, predicate]`): an unknown name or a value of another type throws
   * InvalidArgumentError naming the valid options or the type given, as `run` does. `null` and
   * `undefined` values are absent. Returns the options object (`{}` for none).
   */
  function checkOptions(what, options, allowed) {
    if (options === undefined || options === null) return {}
    if (typeof options !== 'object' || Array.isArray(options)) {
      throw argumentError(`${what} options must be an object, got ${shown(options)}`)
    }
    for (const name of Object.keys(options)) {
      const rule = Object.prototype.hasOwnProperty.call(allowed, name) ? allowed[name] : undefined
      if (rule === undefined) {
        throw argumentError(`${what}: unknown option "${name}"; expected one of: ${Object.keys(allowed).join(', ')}`)
      }
      const [description, ok] = typeof rule === 'string' ? TYPES[rule] : rule
      const value = options[name]
      if (value !== undefined && value !== null && !ok(value)) {
        throw argumentError(`${what}: ${name} must be ${description}, got ${shown(value)}`)
      }
    }
    return options
  }

  /**
   * The RateLimiter an adapter runs on: the one given, or a new one from the `RateLimiter`
   * options given (`undefined`: the defaults, the Discord profile).
   */
  function limiterFrom(what, limiterOrOptions) {
    if (limiterOrOptions instanceof RateLimiter) return limiterOrOptions
    if (limiterOrOptions === undefined || limiterOrOptions === null ||
        (typeof limiterOrOptions === 'object' && !Array.isArray(limiterOrOptions))) {
      return new RateLimiter(limiterOrOptions === null ? undefined : limiterOrOptions)
    }
    throw argumentError(`${what} takes a RateLimiter or RateLimiter options, got ${shown(limiterOrOptions)}`)
  }

  // ---------------------------------------------------------------- request bodies

  /**
   * A request body as text or bytes when it is one already (a string, a typed array, an
   * ArrayBuffer, a DataView, URLSearchParams); `null` for a stream, a Blob, FormData or none,
   * which are never read here.
   */
  function bodyBytes(body) {
    if (body === undefined || body === null) return null
    if (typeof body === 'string') return body
    if (typeof ArrayBuffer === 'function') {
      if (body instanceof ArrayBuffer) return new Uint8Array(body)
      if (ArrayBuffer.isView(body)) return new Uint8Array(body.buffer, body.byteOffset, body.byteLength)
    }
    if (typeof URLSearchParams === 'function' && body instanceof URLSearchParams) return body.toString()
    return null
  }

  /**
   * The `run` options a request's body adds: `costs: { tokens }` and `model` from `estimate`
   * (the caller's function) or, without one, from the core's reader of LLM request bodies
   * (`readLlmRequest`: OpenAI and Anthropic JSON bodies; null for anything else). `estimate`
   * false: none. `request`: `{ method, url, body }`, `body` a string, bytes or null.
   */
  async function estimated(estimate, request) {
    if (estimate === false) return null
    let found
    if (typeof estimate === 'function') {
      found = await estimate(request)
    } else {
      if (request.body === null || typeof ratelane.readLlmRequest !== 'function') return null
      found = ratelane.readLlmRequest(request.body)
    }
    if (found === undefined || found === null) return null
    if (typeof found !== 'object') {
      throw argumentError(`estimate must return { tokens, model } or null, got ${shown(found)}`)
    }
    const extra = {}
    if (found.costs !== undefined && found.costs !== null) extra.costs = found.costs
    else if (found.tokens !== undefined && found.tokens !== null) extra.costs = { tokens: found.tokens }
    if (found.model !== undefined && found.model !== null) extra.model = found.model
    return extra
  }

  // ---------------------------------------------------------------- refusals as responses

  /** The failures that are a rate limit the caller's library can be told about as a 429. */
  const REFUSED_429 = new Set(['deadline_exceeded', 'max_wait_exceeded', 'deferred', 'insufficient_capacity'])

  /** Seconds for `retry-after`, rounded up, from an error's predicted wait (ms), or null. */
  function retryAfterSeconds(error) {
    const wait = error.code === 'deferred' ? error.retryAfter : error.predictedWait
    return typeof wait === 'number' && Number.isFinite(wait) ? Math.max(1, Math.ceil(wait / 1000)) : null
  }

  /**
   * What a library that speaks fetch should see for a request ratelane refused, so that it
   * raises its own error for it:
   *
   * - `retries_exhausted`: the server's own last answer (a 429 or a 403 it still gave after
   *   `maxRateLimitRetries` re-sends), as it came;
   * - a refusal before sending (`deadline_exceeded`, `max_wait_exceeded`, `deferred`,
   *   `insufficient_capacity`): a 429 made here, with `retry-after` (the predicted wait,
   *   whole seconds, when known), `x-should-retry: false` (OpenAI's and Anthropic's SDKs then
   *   do not retry it), `x-ratelane-code` and a JSON body
   *   `{ error: { type: 'rate_limit_error', code, message } }`;
   * - `unauthorized` (the token was refused with 401 before): a 401 made here, likewise;
   * - anything else (`closed`, `maybe_sent`, `network_error`, misuse): null, the error is thrown.
   *
   * A response made here carries the ratelane error as its `ratelaneError` property.
   */
  function refusalResponse(error) {
    const code = error && error.code
    if (code === 'retries_exhausted') {
      const last = error.response
      return last && typeof last.status === 'number' && typeof Response === 'function' && last instanceof Response ? last : null
    }
    let status
    if (REFUSED_429.has(code)) status = 429
    else if (code === 'unauthorized') status = 401
    else return null
    if (typeof Response !== 'function') return null
    const headers = { 'content-type': 'application/json', 'x-should-retry': 'false', 'x-ratelane-code': code }
    const after = status === 429 ? retryAfterSeconds(error) : null
    if (after !== null) headers['retry-after'] = String(after)
    const type = status === 429 ? 'rate_limit_error' : 'authentication_error'
    const body = JSON.stringify({ error: { type, code, message: String(error.message) } })
    const response = new Response(body, { status, headers })
    Object.defineProperty(response, 'ratelaneError', { value: error, enumerable: false })
    return response
  }

  const REFUSALS = ['response', 'throw']
  const refusalOption = [`one of ${REFUSALS.map((r) => `'${r}'`).join(', ')}`, (v) => REFUSALS.includes(v)]

  return { argumentError, shown, checkOptions, limiterFrom, bodyBytes, estimated, refusalResponse, refusalOption }
}
