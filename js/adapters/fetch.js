// `ratelaneFetch(limiter, options)`: a `fetch` that goes through a RateLimiter, for every
// client that takes a `fetch` function (openai, @anthropic-ai/sdk, ky, Octokit's
// `request.fetch`, discordeno's...), in Node, Deno, Bun, browsers and edge runtimes alike.
//
// One factory, no imports (js/adapters/common.js says why); `common` is createAdapterCommon's
// result.

/* eslint-disable no-unused-vars */
function createFetchAdapter(ratelane, common) {
  'use strict'

  const { checkOptions, limiterFrom, bodyBytes, estimated, refusalResponse, refusalOption } = common

  const FETCH_OPTIONS = {
    fetch: 'function',
    refusal: refusalOption,
    estimate: ['a function or false', (v) => typeof v === 'function' || v === false],
    run: 'object',
  }

  /** The method, URL and readable body of a fetch call's arguments (a body that is a stream: null). */
  function describe(input, init) {
    const isRequest = typeof Request === 'function' && input instanceof Request
    const method = String((init && init.method) || (isRequest ? input.method : 'GET')).toUpperCase()
    const url = isRequest ? input.url : String(input instanceof URL ? input.href : input)
    return { method, url, body: init && init.body !== undefined ? bodyBytes(init.body) : null, isRequest }
  }

  /** A JSON body of a Request (OpenAI/Anthropic bodies are JSON), read from a clone; else null. */
  async function requestBody(input) {
    const type = input.headers.get('content-type') || ''
    if (input.body === null || !type.includes('json')) return null
    try {
      return await input.clone().text()
    } catch (_) {
      return null
    }
  }

  /**
   * A fetch-compatible function over `limiter` (a RateLimiter, or RateLimiter options to make
   * one: `ratelaneFetch({ profile: 'openai' })`). Each call waits until the limits allow it,
   * then calls `options.fetch` (default: the global `fetch` at the time of the call); a 429 or
   * a 5xx the core retries is re-sent, and the caller sees the final answer.
   *
   * Options:
   * - `fetch`: the fetch it calls;
   * - `estimate(request)`: `{ tokens, model }` (or `{ costs, model }`) for a request
   *   `{ method, url, body }`, or null; replaces the default estimate, the core's reading of an
   *   OpenAI or Anthropic JSON body (`readLlmRequest`: the prompt's tokens plus the completion
   *   budget, and the model, which keys per-model budgets); `false`: no estimate;
   * - `refusal`: `'response'` (default): a request ratelane refuses before sending resolves to
   *   a 429 `Response` (`x-should-retry: false`, `retry-after`, `x-ratelane-code`), so that the
   *   SDK raises its own rate-limit error; `'throw'`: it rejects with ratelane's error
   *   (MaxWaitExceededError, ...). Common to both: closed, maybe-sent and network failures
   *   reject with ratelane's error (`cause`: the transport's);
   * - `run`: options given to every `run` (`deadline`, `priority`, `identity`, ...).
   *
   * The returned function has `limiter` (the RateLimiter) as a property.
   */
  function ratelaneFetch(limiterOrOptions, options) {
    const opts = checkOptions('ratelaneFetch', options, FETCH_OPTIONS)
    const limiter = limiterFrom('ratelaneFetch', limiterOrOptions)
    const base = opts.fetch || null
    const refusal = opts.refusal || 'response'
    const estimate = opts.estimate === undefined || opts.estimate === null ? undefined : opts.estimate
    const defaults = opts.run || null

    async function fetchThroughRatelane(input, init) {
      const request = describe(input, init)
      if (request.isRequest && request.body === null && (!init || init.body === undefined)) {
        request.body = await requestBody(input)
      }
      const runOptions = defaults === null ? {} : Object.assign({}, defaults)
      const signal = (init && init.signal) || (request.isRequest ? input.signal : null)
      if (signal) runOptions.signal = signal
      const extra = await estimated(estimate, { method: request.method, url: request.url, body: request.body })
      if (extra !== null) {
        if (extra.costs !== undefined && runOptions.costs === undefined) runOptions.costs = extra.costs
        if (extra.model !== undefined && runOptions.model === undefined) runOptions.model = extra.model
      }
      const doFetch = base || globalThis.fetch
      const send = ({ signal: attempt }) => {
        // The driver's signal aborts on the caller's signal too. A Request is cloned for each
        // attempt: its body can be read once.
        const merged = Object.assign({}, init, { signal: attempt })
        return doFetch(request.isRequest ? input.clone() : input, merged)
      }
      try {
        return await limiter.run(request.method, request.url, send, runOptions)
      } catch (error) {
        if (refusal === 'throw') throw error
        const response = refusalResponse(error)
        if (response === null) throw error
        return response
      }
    }
    Object.defineProperty(fetchThroughRatelane, 'limiter', { value: limiter, enumerable: true })
    return fetchThroughRatelane
  }

  return { ratelaneFetch }
}
