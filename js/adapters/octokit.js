// `ratelaneOctokit`: an Octokit plugin that takes the place of @octokit/plugin-throttling
// (`Octokit.plugin(ratelaneOctokit)`), on the core's `github` profile: each request waits for
// the primary budget of its resource (`core`, `search`, `graphql`, ... learned from the
// answers' `x-ratelimit-resource`) and for a secondary limit's pause, instead of Bottleneck's
// fixed spacing; a store (`shared: new RedisStore(...)`) shares them between processes.
//
// One factory, no imports (js/adapters/common.js); `common` is createAdapterCommon's result.
//
// The hooks of plugin-throttling keep their meaning and signature, `(retryAfter, options,
// octokit, retryCount) => boolean`: when the server refused a request all the same (a primary
// limit, `onRateLimit`; a secondary one, `onSecondaryRateLimit`: which one, the core says),
// returning true sends it again when the core's pause is over, false throws Octokit's own
// RequestError. Without a hook, a refused request is sent again up to DEFAULT_RETRIES times.
// The limiter itself never retries (`maxRateLimitRetries: 0`): the hooks decide.

/* eslint-disable no-unused-vars */
function createOctokitAdapter(ratelane, common) {
  'use strict'

  const { RateLimiter, RateLimitError } = ratelane
  const { checkOptions, limiterFrom, argumentError, shown } = common

  /** Re-sends of a refused request when no hook decides. */
  const DEFAULT_RETRIES = 3

  const THROTTLE_OPTIONS = {
    onRateLimit: 'function',
    onSecondaryRateLimit: 'function',
    enabled: 'boolean',
  }

  /** The plugin's limiter: the one given (github profile, no retries of its own) or a new one. */
  function limiterFor(given) {
    if (given instanceof RateLimiter) {
      const config = given.config
      if (config.profile !== 'github') {
        throw argumentError(`ratelaneOctokit: the RateLimiter's profile must be 'github', got ${shown(config.profile)}`)
      }
      if (config.max_rate_limit_retries !== 0) {
        throw argumentError('ratelaneOctokit: the RateLimiter must not retry 429s itself (the throttle hooks decide): ' +
          'create it with { profile: \'github\', maxRateLimitRetries: 0 }, or pass its options instead')
      }
      return given
    }
    if (given !== undefined && given !== null && (typeof given !== 'object' || Array.isArray(given))) {
      throw argumentError(`ratelaneOctokit: the ratelane option takes a RateLimiter or RateLimiter options, got ${shown(given)}`)
    }
    const options = Object.assign({ profile: 'github' }, given || {})
    if (options.profile !== 'github') {
      throw argumentError(`ratelaneOctokit: profile must be 'github', got ${shown(options.profile)}`)
    }
    if (options.maxRateLimitRetries !== undefined && options.maxRateLimitRetries !== 0) {
      throw argumentError(`ratelaneOctokit: maxRateLimitRetries must be 0 (the throttle hooks decide), got ${shown(options.maxRateLimitRetries)}`)
    }
    options.maxRateLimitRetries = 0
    return limiterFrom('ratelaneOctokit', options)
  }

  /**
   * The core's last word on each request of `limiter` it saw refused (which scope, how long
   * the pause), by method and route: one listener per limiter, however many Octokits share it.
   */
  const refusalMaps = new WeakMap()
  function refusalsOf(limiter) {
    let refusals = refusalMaps.get(limiter)
    if (refusals === undefined) {
      refusals = new Map()
      refusalMaps.set(limiter, refusals)
      limiter.on('rateLimited', (event) => {
        if (event.path !== undefined) refusals.set(`${event.method} ${event.path}`, event)
      })
    }
    return refusals
  }

  /** Octokit's answer, or its RequestError for a status >= 400, as the driver takes it. */
  function attempt(request, options) {
    return request(options).then(
      (response) => ({ status: response.status, headers: response.headers, body: response.data, octokit: response, error: null }),
      (error) => {
        const response = error && error.response
        if (!response || typeof error.status !== 'number') throw error // the transport's
        return { status: error.status, headers: response.headers, body: response.data, octokit: null, error }
      },
    )
  }

  /**
   * The plugin: `const MyOctokit = Octokit.plugin(ratelaneOctokit)`, then
   * `new MyOctokit({ auth, ratelane: limiterOrOptions, throttle: { onRateLimit, onSecondaryRateLimit } })`.
   * `ratelane`: a RateLimiter of the `github` profile with `maxRateLimitRetries: 0`, or the
   * options of a new one (those two are then set), e.g. `{ shared: new RedisStore(url, { prefix }) }`
   * (give every Octokit of one token the same limiter or the same store). `throttle.enabled:
   * false` turns the plugin off. The instance gets `octokit.ratelane.limiter`.
   * A refusal of ratelane's own (`maxWait`, a deadline, closed) throws ratelane's error.
   */
  function ratelaneOctokit(octokit, octokitOptions) {
    const throttle = checkOptions('ratelaneOctokit: throttle', octokitOptions && octokitOptions.throttle, THROTTLE_OPTIONS)
    if (throttle.enabled === false) return {}
    const limiter = limiterFor(octokitOptions && octokitOptions.ratelane)
    const refusals = refusalsOf(limiter)

    octokit.hook.wrap('request', async (request, options) => {
      const method = String(options.method || 'GET').toUpperCase()
      // The route as Octokit names it (`/repos/{owner}/{repo}/issues`): one route per
      // endpoint, whatever its parameters.
      const path = String(options.url || '/')
      for (let retryCount = 0; ; retryCount++) {
        let answer
        try {
          answer = await limiter.run(method, path, () => attempt(request, options))
        } catch (error) {
          if (!(error instanceof RateLimitError)) throw error
          const refused = error.code === 'retries_exhausted' && error.response && error.response.error
          if (!refused) {
            if ((error.code === 'network_error' || error.code === 'maybe_sent') && error.cause !== undefined) throw error.cause
            throw error
          }
          const key = `${method} ${path}`
          const event = refusals.get(key)
          refusals.delete(key)
          const secondary = event !== undefined && event.scope === 'global'
          const hook = secondary ? throttle.onSecondaryRateLimit : throttle.onRateLimit
          const retryAfter = event !== undefined ? Math.ceil(event.retryAfter / 1000) : 0
          const again = typeof hook === 'function'
            ? await hook(retryAfter, options, octokit, retryCount)
            : retryCount < DEFAULT_RETRIES
          if (again) continue // the core holds it until the pause is over
          throw refused // Octokit's own RequestError
        }
        if (answer.error) throw answer.error // a 4xx that is no rate limit (404, a plain 403)
        return answer.octokit
      }
    })
    return { ratelane: { limiter } }
  }

  return { ratelaneOctokit }
}
