// `interceptor(limiter, { origins })`: an undici interceptor (`dispatcher.compose(...)`) that
// holds each request to the given origins until the limits allow it and hands its answer to
// the core; `install(limiter, { origins })` composes it into undici's global dispatcher, which
// Node's own `fetch` uses too, so code that calls `fetch` is limited without a change.
//
// One factory, no imports (js/adapters/common.js); `host.loadUndici()` gives the undici
// module for `install` (the Node entry requires the application's `undici`).
//
// How a request goes through (each attempt is a dispatch of its own):
// - it is queued in the driver (`run`) until the core says send; the caller's abort while
//   queued cancels it there;
// - an attempt's answer: an error status (>= 400) or a JSON body is read whole first (up to
//   MAX_BODY bytes): the core may want its body (a 429's `retry_after`, an LLM answer's
//   `usage`), and a retried answer must never reach the caller. Any other answer is handed to
//   the driver at its headers, the body held (paused) until the driver's verdict;
// - the verdict: the attempt the driver resolves with is replayed to the caller's handler
//   (headers, the body read so far, then the rest streamed with the caller's flow control);
//   an attempt the core retries is dropped (aborted if still open);
// - a refusal becomes a 429 answer (`refusal: 'response'`, the default; js/adapters/common.js
//   says which and why) or the handler's `onError` with ratelane's error (`'throw'`); a
//   transport failure reaches `onError` as undici's own error.
//
// Handlers: undici 7 hands interceptors handlers of its new API (`onRequestStart`,
// `onResponseStart`, ...) and accepts them downstream; undici 6's `compose` hands the old one
// (`onConnect`, `onHeaders`, ...). Each request speaks the API of the handler it was given,
// both ways.

/* eslint-disable no-unused-vars */
function createUndiciAdapter(ratelane, common, host) {
  'use strict'

  const { RateLimitError } = ratelane
  const { checkOptions, limiterFrom, bodyBytes, estimated, refusalResponse, refusalOption, argumentError } = common

  /** The most body bytes read before the driver's verdict; a longer body streams. */
  const MAX_BODY = 1024 * 1024

  const INTERCEPTOR_OPTIONS = {
    origins: 'strings',
    refusal: refusalOption,
    estimate: ['a function or false', (v) => typeof v === 'function' || v === false],
    run: 'object',
  }

  function originOf(value) {
    try {
      return new URL(String(value)).origin
    } catch (_) {
      throw argumentError(`interceptor: origins must be URLs such as 'https://api.openai.com' or '*', got ${common.shown(value)}`)
    }
  }

  /** `origins` as a test of a dispatch's origin: a list of URLs, or '*' for every origin. */
  function originTest(origins) {
    if (origins === undefined || origins === null) {
      throw argumentError("interceptor: origins is required: the origins to limit, e.g. { origins: ['https://discord.com'] }, or '*' for all")
    }
    const list = typeof origins === 'string' ? [origins] : origins
    if (list.includes('*')) return () => true
    const set = new Set(list.map(originOf))
    return (origin) => {
      if (origin === undefined || origin === null) return false
      try {
        return set.has(typeof origin === 'string' ? new URL(origin).origin : origin.origin)
      } catch (_) {
        return false
      }
    }
  }

  // ---------------------------------------------------------------- header forms

  const latin1 = (text) => (typeof Buffer === 'function' ? Buffer.from(text, 'latin1') : text)

  /** undici's old raw headers (Buffers or strings, name then value) as `[name, value]` pairs. */
  function rawPairs(raw) {
    const pairs = []
    if (!raw) return pairs
    for (let i = 0; i + 1 < raw.length; i += 2) {
      const value = raw[i + 1]
      const values = Array.isArray(value) ? value : [value]
      for (const v of values) pairs.push([String(raw[i]), String(v)])
    }
    return pairs
  }

  /** The new API's headers object (`{ name: value | value[] }`) as pairs. */
  function objectPairs(headers) {
    const pairs = []
    if (!headers) return pairs
    for (const name of Object.keys(headers)) {
      const value = headers[name]
      if (Array.isArray(value)) for (const v of value) pairs.push([name, String(v)])
      else if (value !== undefined && value !== null) pairs.push([name, String(value)])
    }
    return pairs
  }

  function pairsObject(pairs) {
    const out = {}
    for (const [name, value] of pairs) {
      const key = name.toLowerCase()
      if (out[key] === undefined) out[key] = value
      else if (Array.isArray(out[key])) out[key].push(value)
      else out[key] = [out[key], value]
    }
    return out
  }

  function pairsRaw(pairs) {
    const raw = []
    for (const [name, value] of pairs) raw.push(latin1(name), latin1(value))
    return raw
  }

  function isJson(pairs) {
    for (const [name, value] of pairs) {
      if (name.toLowerCase() === 'content-type') return value.toLowerCase().includes('json')
    }
    return false
  }

  function concat(chunks) {
    if (typeof Buffer === 'function') return Buffer.concat(chunks.map((c) => (typeof c === 'string' ? Buffer.from(c) : c)))
    let n = 0
    for (const c of chunks) n += c.length
    const out = new Uint8Array(n)
    let at = 0
    for (const c of chunks) { out.set(c, at); at += c.length }
    return out
  }

  // ---------------------------------------------------------------- the caller's handler

  /**
   * The caller's handler behind one interface, whichever API it speaks. `controls` is how the
   * caller pauses, resumes and aborts: `{ pause(), resume(), abort(reason) }`.
   */
  function upstream(handler, controls) {
    if (typeof handler.onRequestStart === 'function' || typeof handler.onResponseStart === 'function') {
      let paused = false
      const controller = {
        pause() { paused = true; controls.pause() },
        resume() { if (paused) { paused = false; controls.resume() } },
        abort(reason) { controls.abort(reason) },
        get paused() { return paused },
        get aborted() { return controls.aborted() },
        get reason() { return controls.reason() },
      }
      return {
        modern: true,
        start(context) { if (handler.onRequestStart) handler.onRequestStart(controller, context || {}) },
        headers(status, pairs, statusText) {
          if (handler.onResponseStart) handler.onResponseStart(controller, status, pairsObject(pairs), statusText || '')
          return !paused
        },
        data(chunk) {
          if (handler.onResponseData) handler.onResponseData(controller, chunk)
          return !paused
        },
        end(trailers) { if (handler.onResponseEnd) handler.onResponseEnd(controller, trailers || {}) },
        error(error) { handler.onResponseError(controller, error) },
      }
    }
    return {
      modern: false,
      start(context) { if (handler.onConnect) handler.onConnect((reason) => controls.abort(reason), context || {}) },
      headers(status, pairs, statusText) {
        if (!handler.onHeaders) return true
        return handler.onHeaders(status, pairsRaw(pairs), () => controls.resume(), statusText || '') !== false
      },
      data(chunk) {
        return handler.onData ? handler.onData(chunk) !== false : true
      },
      end(trailers) { if (handler.onComplete) handler.onComplete(pairsRaw(objectPairs(trailers))) },
      error(error) { if (handler.onError) handler.onError(error); else throw error },
    }
  }

  // ---------------------------------------------------------------- one attempt

  /**
   * One dispatch of the request: a handler of both undici APIs (undici 7 calls the new one,
   * undici 6 the old), and the promise `send` returns to the driver.
   */
  class Attempt {
    constructor(request) {
      this.request = request
      this.abortDown = null // aborts the dispatch
      this.pauseDown = null
      this.resumeDown = null
      this.status = 0
      this.statusText = ''
      this.pairs = null
      this.chunks = []
      this.size = 0
      this.buffering = false
      this.ended = false
      this.trailers = null
      this.failed = null
      this.forwarding = false // the caller's handler gets what follows
      this.dropped = false
      this.response = null
      this.settle = null
    }

    // The new API.
    onRequestStart(controller) {
      this.abortDown = (reason) => controller.abort(reason)
      this.pauseDown = () => controller.pause()
      this.resumeDown = () => controller.resume()
      if (this.dropped) controller.abort(new Error('ratelane: attempt dropped'))
    }
    onResponseStart(controller, status, headers, statusText) {
      if (!this._headers(status, objectPairs(headers), statusText)) controller.pause()
    }
    onResponseData(controller, chunk) {
      if (!this._data(chunk)) controller.pause()
    }
    onResponseEnd(controller, trailers) { this._end(trailers || {}) }
    onResponseError(controller, error) { this._error(error) }

    // The old API.
    onConnect(abort) {
      this.abortDown = abort
      if (this.dropped) abort(new Error('ratelane: attempt dropped'))
    }
    onHeaders(status, raw, resume, statusText) {
      this.resumeDown = resume
      this.pauseDown = null // the old API pauses by returning false
      return this._headers(status, rawPairs(raw), statusText)
    }
    onData(chunk) { return this._data(chunk) }
    onComplete(rawTrailers) { this._end(pairsObject(rawPairs(rawTrailers))) }
    onError(error) { this._error(error) }
    onUpgrade() { this._error(new Error('ratelane: an upgrade answer to a request that asked for none')) }

    _headers(status, pairs, statusText) {
      if (this.dropped) return false
      this.status = status
      this.statusText = statusText
      this.pairs = pairs
      this.buffering = status >= 400 || isJson(pairs)
      if (this.buffering) return true
      this._answer(undefined)
      return false // held until the driver's verdict
    }

    _data(chunk) {
      if (this.dropped) return false
      if (this.forwarding) return this.request.up.data(chunk)
      this.chunks.push(chunk)
      this.size += chunk.length
      if (this.buffering && this.size > MAX_BODY) {
        // Too long to read first: the driver gets the headers alone, the rest streams.
        this.buffering = false
        this._answer(undefined)
      }
      return this.buffering
    }

    _end(trailers) {
      this.ended = true
      this.trailers = trailers
      if (this.dropped) return
      if (this.forwarding) {
        this.request.up.end(trailers)
      } else if (this.buffering) {
        const bytes = concat(this.chunks)
        let text = null
        try {
          text = new TextDecoder().decode(bytes)
        } catch (_) { /* not text: no body hints */ }
        this._answer(text)
      }
    }

    _error(error) {
      if (this.dropped) return
      if (this.forwarding) {
        this.request.up.error(error)
        return
      }
      this.failed = error
      if (this.settle) {
        const settle = this.settle
        this.settle = null
        settle.reject(error)
      }
    }

    /** The answer as the driver takes it: status, headers and, when read whole, the body text. */
    _answer(text) {
      if (this.response !== null) return
      this.response = { status: this.status, headers: this.pairs }
      if (typeof text === 'string') this.response.body = text
      if (this.settle) {
        const settle = this.settle
        this.settle = null
        settle.resolve(this.response)
      }
    }

    /** Ends this attempt unseen by the caller (the core retried it, or it lost a race). */
    drop() {
      if (this.dropped || this.forwarding) return
      this.dropped = true
      if (!this.ended && this.failed === null && this.abortDown) {
        try {
          this.abortDown(new Error('ratelane: attempt dropped'))
        } catch (_) { /* already over */ }
      }
    }

    /** Replays this attempt to the caller's handler, then streams the rest of it. */
    deliver() {
      const up = this.request.up
      this.forwarding = true
      if (!up.headers(this.status, this.pairs, this.statusText)) this.request.waitingResume = true
      const chunks = this.chunks
      this.chunks = []
      for (const chunk of chunks) up.data(chunk)
      if (this.ended) {
        up.end(this.trailers)
      } else if (this.failed !== null) {
        up.error(this.failed)
      } else if (!this.request.waitingResume && this.resumeDown) {
        this.resumeDown()
      }
    }
  }

  // ---------------------------------------------------------------- one request

  class InterceptedRequest {
    constructor(limiter, dispatch, opts, handler, settings) {
      this.limiter = limiter
      this.dispatch = dispatch
      this.opts = opts
      this.settings = settings
      this.queue = typeof AbortController === 'function' ? new AbortController() : null
      this.current = null
      this.delivered = null
      this.waitingResume = false
      this.finished = false
      this.up = upstream(handler, {
        pause: () => { const a = this.delivered; if (a && a.pauseDown) a.pauseDown() },
        resume: () => {
          this.waitingResume = false
          const a = this.delivered
          if (a && a.resumeDown) a.resumeDown()
        },
        abort: (reason) => this.abort(reason),
        aborted: () => this.queue !== null && this.queue.signal.aborted,
        reason: () => (this.queue !== null ? this.queue.signal.reason : undefined),
      })
    }

    abort(reason) {
      const why = reason !== undefined ? reason : new Error('aborted')
      if (this.delivered !== null) {
        if (this.delivered.abortDown) this.delivered.abortDown(why)
        return
      }
      if (this.queue !== null && !this.queue.signal.aborted) this.queue.abort(why)
    }

    async start() {
      this.up.start({})
      const opts = this.opts
      const origin = typeof opts.origin === 'string' ? opts.origin : String(opts.origin)
      const url = origin.replace(/\/$/, '') + (opts.path || '/')
      const method = String(opts.method || 'GET').toUpperCase()
      const runOptions = this.settings.run ? Object.assign({}, this.settings.run) : {}
      if (this.queue !== null) runOptions.signal = this.queue.signal
      let response
      try {
        const extra = await estimated(this.settings.estimate, { method, url, body: bodyBytes(opts.body) })
        if (extra !== null) {
          if (extra.costs !== undefined && runOptions.costs === undefined) runOptions.costs = extra.costs
          if (extra.model !== undefined && runOptions.model === undefined) runOptions.model = extra.model
        }
        response = await this.limiter.run(method, url, (context) => this.send(context), runOptions)
      } catch (error) {
        this.fail(error)
        return
      }
      const attempt = this.attemptOf(response)
      if (attempt === null) {
        this.fail(new Error('ratelane: the driver resolved with an answer of no attempt'))
        return
      }
      this.finish(attempt)
    }

    attemptOf(response) {
      const a = this.current
      return a !== null && a.response === response ? a : null
    }

    send(context) {
      if (this.current !== null) this.current.drop()
      const attempt = new Attempt(this)
      this.current = attempt
      const promise = new Promise((resolve, reject) => { attempt.settle = { resolve, reject } })
      const signal = context.signal
      if (signal) {
        const onAbort = () => { if (!attempt.forwarding) attempt.drop() }
        if (signal.aborted) onAbort()
        else signal.addEventListener('abort', onAbort, { once: true })
      }
      // Synchronously: the driver ties the undici request created here to this attempt.
      this.dispatch(Object.assign({}, this.opts), attempt)
      return promise
    }

    finish(attempt) {
      if (this.finished) return
      this.finished = true
      this.delivered = attempt
      attempt.deliver()
    }

    /** `run` rejected: a refusal, a transport failure, an abort or misuse. */
    fail(error) {
      if (this.finished) return
      // The server's last answer when the core gave up after retries (refusal 'response').
      if (this.settings.refusal !== 'throw' && error instanceof RateLimitError && error.code === 'retries_exhausted') {
        const attempt = this.attemptOf(error.response)
        if (attempt !== null) {
          this.finish(attempt)
          return
        }
      }
      this.finished = true
      if (this.current !== null) this.current.drop()
      if (this.settings.refusal !== 'throw' && error instanceof RateLimitError) {
        const response = refusalResponse(error)
        if (response !== null) {
          this.replay(response)
          return
        }
      }
      // A transport failure: undici's own error, as without the interceptor.
      const cause = error instanceof RateLimitError && error.cause !== undefined ? error.cause : error
      try {
        this.up.error(cause)
      } catch (_) { /* a handler without onError: nothing to tell */ }
    }

    /** A Response made here (a refusal), told to the caller's handler. */
    async replay(response) {
      const pairs = []
      response.headers.forEach((value, name) => pairs.push([name, value]))
      const body = new Uint8Array(await response.arrayBuffer())
      try {
        this.up.headers(response.status, pairs, '')
        this.up.data(typeof Buffer === 'function' ? Buffer.from(body) : body)
        this.up.end({})
      } catch (error) {
        this.up.error(error)
      }
    }
  }

  /**
   * The interceptor: `dispatcher.compose(interceptor(limiter, { origins }))`. `limiter`: a
   * RateLimiter, or the options of a new one. Options: `origins` (required: the origins it
   * limits, e.g. `['https://discord.com']`, or `'*'`; other requests pass untouched),
   * `refusal` (`'response'` default, `'throw'`), `estimate` and `run` (as `ratelaneFetch`'s).
   * The interceptor function has `limiter` as a property.
   */
  function interceptor(limiterOrOptions, options) {
    const opts = checkOptions('interceptor', options, INTERCEPTOR_OPTIONS)
    const applies = originTest(opts.origins)
    const limiter = limiterFrom('interceptor', limiterOrOptions)
    const settings = {
      refusal: opts.refusal || 'response',
      estimate: opts.estimate === undefined || opts.estimate === null ? undefined : opts.estimate,
      run: opts.run || null,
    }
    const intercept = (dispatch) => function ratelaneDispatch(dispatchOptions, handler) {
      const method = String(dispatchOptions.method || 'GET').toUpperCase()
      if (!applies(dispatchOptions.origin) || dispatchOptions.upgrade || method === 'CONNECT') {
        return dispatch(dispatchOptions, handler)
      }
      new InterceptedRequest(limiter, dispatch, dispatchOptions, handler, settings).start()
      return true
    }
    Object.defineProperty(intercept, 'limiter', { value: limiter, enumerable: true })
    return intercept
  }

  /**
   * Composes `interceptor(limiter, options)` into undici's global dispatcher, which Node's
   * built-in `fetch` uses too. `options.undici`: the undici module (default: the
   * application's `undici`, 7 or later). Returns a function that puts the previous global
   * dispatcher back.
   */
  function install(limiterOrOptions, options) {
    const opts = checkOptions('install', options, Object.assign({ undici: 'object' }, INTERCEPTOR_OPTIONS))
    const rest = Object.assign({}, opts)
    delete rest.undici
    const intercept = interceptor(limiterOrOptions, rest)
    let undici = opts.undici
    if (undici === undefined || undici === null) {
      if (!host || typeof host.loadUndici !== 'function') {
        throw argumentError('install needs the undici module: install(limiter, { origins, undici })')
      }
      undici = host.loadUndici()
    }
    if (typeof undici.getGlobalDispatcher !== 'function' || typeof undici.setGlobalDispatcher !== 'function') {
      throw argumentError('install: undici must be the undici module (getGlobalDispatcher, setGlobalDispatcher)')
    }
    const previous = undici.getGlobalDispatcher()
    if (typeof previous.compose !== 'function') {
      throw argumentError('install needs undici 7 or later (Dispatcher.compose with the handler API it uses)')
    }
    undici.setGlobalDispatcher(previous.compose(intercept))
    const uninstall = () => undici.setGlobalDispatcher(previous)
    Object.defineProperty(uninstall, 'limiter', { value: intercept.limiter, enumerable: true })
    return uninstall
  }

  return { interceptor, install }
}
