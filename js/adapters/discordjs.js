// `discordRest(limiter, options)`: REST options for discord.js (`new Client({ intents, rest:
// discordRest(limiter) })`) and @discordjs/rest (`new REST(discordRest(limiter))`): a
// `makeRequest` that puts ratelane under discord.js's own handlers, and
// `globalRequestsPerSecond: Infinity`, which leaves the global limit to ratelane alone.
//
// One factory, no imports (js/adapters/common.js); `host.loadDiscordRest()` gives
// @discordjs/rest, whose default `makeRequest` (undici's `request`, with its FormData) does
// the HTTP.
//
// discord.js keeps everything it does: its bucket queues (one request in flight per bucket),
// its hidden sub-limit queue, its 429 and 5xx retries, its errors (DiscordAPIError,
// HTTPError, RateLimitError with `rejectOnRateLimit`). ratelane adds what discord.js lacks:
// the global limit held at the server (a window over when requests were written, a margin
// learned from the latency) and shared with other processes and shards through the limiter's
// store (`shared: new RedisStore(...)`), and the invalid-request budget enforced. So the
// limiter never retries: every 429 and 5xx goes back to discord.js as the answer it is
// (`maxRateLimitRetries` and `maxErrorRetries` must be 0; the options form sets them), after
// the core has learned from it. ratelane waits only for what it adds (the global window, the
// invalid-request budget, a 429's pause the core learned); a bucket or a sub-limit is
// discord.js's to wait for, in its own queues, so none is held behind a wait of ratelane's.
//
// discord.js aborts a `makeRequest` after its `timeout` (15 s) and retries it (an AbortError
// is retried `retries` times). A request still queued in the limiter when that happens keeps
// its place: the abort rejects the call as discord.js expects, and discord.js's retry of the
// same request (the same `init.headers` object) takes the queued request over. A retry that
// comes already aborted (the caller's own signal), or none within REATTACH_MS, cancels it.
// That @discordjs/rest passes one `init.headers` object to every attempt of a request is how it
// is written (2.6.3: `resolveRequest` builds the options once), not a documented promise:
// js/test/integrations/discordjs.test.mjs checks it, and fails when a version changes it.

/* eslint-disable no-unused-vars */
function createDiscordjsAdapter(ratelane, common, host) {
  'use strict'

  const { RateLimitError } = ratelane
  const { checkOptions, limiterFrom, argumentError, shown } = common

  /** How long a request whose call was aborted while queued waits for discord.js's retry. */
  const REATTACH_MS = 2000

  const DISCORD_OPTIONS = {
    makeRequest: 'function',
    run: 'object',
  }

  /** The limiter settings the adapter needs: discord.js owns every retry. */
  const NO_RETRIES = { maxRateLimitRetries: 0, maxErrorRetries: 0 }

  function limiterFor(limiterOrOptions) {
    if (limiterOrOptions instanceof ratelane.RateLimiter) {
      const config = limiterOrOptions.config
      if (config.max_rate_limit_retries !== 0 || config.max_error_retries !== 0) {
        throw argumentError('discordRest: the RateLimiter must not retry (discord.js retries 429s and 5xx itself): ' +
          'create it with { maxRateLimitRetries: 0, maxErrorRetries: 0 }, or pass its options instead')
      }
      return limiterOrOptions
    }
    if (limiterOrOptions !== undefined && limiterOrOptions !== null &&
        (typeof limiterOrOptions !== 'object' || Array.isArray(limiterOrOptions))) {
      throw argumentError(`discordRest takes a RateLimiter or RateLimiter options, got ${shown(limiterOrOptions)}`)
    }
    const options = Object.assign({}, limiterOrOptions || {})
    for (const name of Object.keys(NO_RETRIES)) {
      if (options[name] !== undefined && options[name] !== 0) {
        throw argumentError(`discordRest: ${name} must be 0 (discord.js retries 429s and 5xx itself), got ${shown(options[name])}`)
      }
    }
    return limiterFrom('discordRest', Object.assign(options, NO_RETRIES))
  }

  /** The top-level keys of a JSON body (a channel rename's `name`: its sub-limit class). */
  function jsonKeys(body) {
    if (typeof body !== 'string' || body.length === 0 || body[0] !== '{') return null
    try {
      const parsed = JSON.parse(body)
      return parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed) ? Object.keys(parsed) : null
    } catch (_) {
      return null
    }
  }

  function abortError(signal) {
    if (signal && signal.reason !== undefined) return signal.reason
    const error = new Error('This operation was aborted')
    error.name = 'AbortError'
    return error
  }

  /**
   * An answer discord.js will read, with its body readable by the driver too: an error
   * status's body is read here (it is short: a 429's `retry_after` and `global`, an error's
   * JSON) and a fetch `Response` made of it, which both read; any other answer is passed as
   * it came.
   */
  async function readable(response) {
    if (response.status < 400 || typeof Response !== 'function') return response
    const text = await response.text()
    const headers = []
    response.headers.forEach((value, name) => headers.push([name, value]))
    return new Response(text.length > 0 ? text : null, { status: response.status, statusText: response.statusText || '', headers })
  }

  /** One request of discord.js, from its first `makeRequest` call to the core's outcome. */
  class QueuedRequest {
    constructor(adapter, url, init) {
      this.adapter = adapter
      this.url = url
      this.method = String(init.method || 'GET').toUpperCase()
      this.init = init
      this.cancel = typeof AbortController === 'function' ? new AbortController() : null
      this.sending = false // the core said send: the request is (being) written
      this.call = null // the makeRequest call waiting for the outcome: { resolve, reject, signal, onAbort }
      this.waitingCall = null // send, while no call is attached: resumes when one is
      this.parkTimer = null
    }

    start() {
      const { limiter, base, defaults } = this.adapter
      const options = defaults === null ? {} : Object.assign({}, defaults)
      if (this.cancel !== null) options.signal = this.cancel.signal
      const keys = jsonKeys(this.init.body)
      if (keys !== null && options.bodyKeys === undefined) options.bodyKeys = keys
      limiter.run(this.method, this.url, (context) => this.send(base, context), options)
        .then((response) => this.settle(null, response), (error) => this.settle(error, null))
    }

    /** A makeRequest call takes this request: the first one, or discord.js's retry of it. */
    attach(init) {
      this.init = init
      const signal = init.signal || null
      if (this.parkTimer !== null) {
        clearTimeout(this.parkTimer)
        this.parkTimer = null
      }
      return new Promise((resolve, reject) => {
        if (signal && signal.aborted) {
          // Aborted before it was made: the caller's own abort (discord.js checks it first).
          this.abandon(abortError(signal))
          reject(abortError(signal))
          return
        }
        const call = { resolve, reject, signal, onAbort: null }
        if (signal) {
          call.onAbort = () => this.onCallAborted(call)
          signal.addEventListener('abort', call.onAbort, { once: true })
        }
        this.call = call
        if (this.waitingCall !== null) {
          const resume = this.waitingCall
          this.waitingCall = null
          resume(true)
        }
      })
    }

    onCallAborted(call) {
      if (this.call !== call) return
      const reason = abortError(call.signal)
      if (this.sending) {
        // In flight: discord.js's timeout, or its caller, aborts the HTTP request.
        this.abandon(reason)
        return
      }
      // Queued: the call ends as discord.js expects, the request keeps its place for the retry.
      this.detach()
      call.reject(reason)
      this.adapter.park(this)
      this.parkTimer = setTimeout(() => {
        this.parkTimer = null
        this.adapter.unpark(this)
        this.abandon(reason)
      }, REATTACH_MS)
      if (typeof this.parkTimer === 'object' && typeof this.parkTimer.unref === 'function') this.parkTimer.unref()
    }

    detach() {
      const call = this.call
      this.call = null
      if (call !== null && call.signal && call.onAbort) call.signal.removeEventListener('abort', call.onAbort)
      return call
    }

    /**
     * Gives the request up (its outcome then goes nowhere): a send waiting for a call ends as
     * never sent (the core takes its global token back); otherwise it is cancelled in the
     * limiter, queued or in flight.
     */
    abandon(reason) {
      if (this.waitingCall !== null) {
        const resume = this.waitingCall
        this.waitingCall = null
        resume(false)
        return
      }
      if (this.cancel !== null && !this.cancel.signal.aborted) this.cancel.abort(reason)
    }

    /** The driver's `send`: the HTTP request, once a makeRequest call is attached. */
    send(base, context) {
      if (this.call === null) {
        // The core said send while discord.js's retry is on its way: wait for it (bounded by
        // the park timer), or end as never sent.
        return new Promise((resolve) => { this.waitingCall = resolve }).then((attached) => {
          if (!attached) throw Object.assign(new Error('ratelane: discord.js gave the request up'), { ratelaneFailure: 'not_sent' })
          return this.send(base, context)
        })
      }
      this.sending = true
      const init = Object.assign({}, this.init, { signal: context.signal })
      return Promise.resolve(base(this.url, init)).then(readable)
    }

    settle(error, response) {
      if (this.parkTimer !== null) {
        clearTimeout(this.parkTimer)
        this.parkTimer = null
      }
      this.adapter.unpark(this)
      const call = this.detach()
      if (call === null) return // given up: nobody waits for it
      if (error === null) {
        call.resolve(response)
      } else if (error instanceof RateLimitError && error.code === 'retries_exhausted' && error.response) {
        // A 429 (or a 5xx) the limiter does not retry: discord.js's to handle, as it came.
        call.resolve(error.response)
      } else if (error instanceof RateLimitError && (error.code === 'network_error' || error.code === 'maybe_sent') &&
          error.cause !== undefined) {
        // The transport's own error (discord.js retries an ECONNRESET or an abort).
        call.reject(error.cause)
      } else {
        call.reject(error)
      }
    }
  }

  /**
   * REST options for discord.js and @discordjs/rest: `{ makeRequest, globalRequestsPerSecond:
   * Infinity }`. `limiter`: a RateLimiter that does not retry (`maxRateLimitRetries: 0,
   * maxErrorRetries: 0`), or the options of a new one (those two are then set), e.g.
   * `{ shared: new RedisStore(url, { prefix }) }` for every shard and process of one bot.
   * Options: `makeRequest` (the HTTP it calls; default @discordjs/rest's own, undici's
   * `request`; without that package, the global `fetch`), `run` (options of every `run`).
   * A refusal of ratelane's (`maxWait`, a deadline, closed) rejects the discord.js call with
   * ratelane's error (MaxWaitExceededError, ...). The result has `limiter` as a property
   * (not enumerable, so that it never reaches discord.js's options).
   */
  function discordRest(limiterOrOptions, options) {
    const opts = checkOptions('discordRest', options, DISCORD_OPTIONS)
    const limiter = limiterFor(limiterOrOptions)
    let base = opts.makeRequest || null
    if (base === null) {
      const rest = host && typeof host.loadDiscordRest === 'function' ? host.loadDiscordRest() : null
      base = rest && rest.DefaultRestOptions && typeof rest.DefaultRestOptions.makeRequest === 'function'
        ? rest.DefaultRestOptions.makeRequest.bind(rest.DefaultRestOptions)
        : (url, init) => globalThis.fetch(url, init)
    }
    const parked = new WeakMap()
    const adapter = {
      limiter,
      base,
      defaults: opts.run || null,
      park(request) {
        const key = request.init && request.init.headers
        if (key !== null && typeof key === 'object') parked.set(key, request)
      },
      unpark(request) {
        const key = request.init && request.init.headers
        if (key !== null && typeof key === 'object' && parked.get(key) === request) parked.delete(key)
      },
    }
    function makeRequest(url, init) {
      const request = init || {}
      const key = request.headers
      const waiting = key !== null && typeof key === 'object' ? parked.get(key) : undefined
      if (waiting !== undefined && waiting.url === url && waiting.method === String(request.method || 'GET').toUpperCase()) {
        parked.delete(key)
        return waiting.attach(request)
      }
      const queued = new QueuedRequest(adapter, url, request)
      const call = queued.attach(request)
      queued.start()
      return call
    }
    const result = { makeRequest, globalRequestsPerSecond: Infinity }
    Object.defineProperty(result, 'limiter', { value: limiter, enumerable: false })
    return result
  }

  return { discordRest }
}
