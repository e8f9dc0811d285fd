// Types of the adapters (js/adapters/*.js), shared by the Node and the wasm package.
import type { RateLimiter, RateLimiterOptions, RunOptions } from './driver.js'

/** What an `estimate` function is given: the request as the adapter sees it. */
export interface EstimateRequest {
  method: string
  url: string
  /** The body when it is text or bytes already; null for none, a stream, a Blob or FormData. */
  body: string | Uint8Array | null
}

/**
 * A request's estimate: its tokens (or costs per dimension) and the model that keys the
 * per-model budgets. Returned by an `estimate` function; null: none.
 */
export interface LlmEstimate {
  tokens?: number | null
  costs?: Record<string, number> | null
  model?: string | null
}

/**
 * How a request ratelane refuses before sending (deadline, `maxWait`, `deferAfter`, a cost
 * above a whole budget) reaches the caller: `'response'`, a 429 `Response` with
 * `x-should-retry: false`, `retry-after` and `x-ratelane-code` (the SDK raises its own
 * rate-limit error); `'throw'`, ratelane's own error (`MaxWaitExceededError`, ...).
 */
export type Refusal = 'response' | 'throw'

export interface FetchOptions {
  /** The fetch it calls (default: the global `fetch` at the time of each call). */
  fetch?: (input: any, init?: any) => Promise<Response>
  /**
   * The estimate of a request, replacing the core's reading of OpenAI and Anthropic JSON
   * bodies (`readLlmRequest`); `false`: no estimate.
   */
  estimate?: ((request: EstimateRequest) => LlmEstimate | null | undefined | Promise<LlmEstimate | null | undefined>) | false | null
  /** Default `'response'`. */
  refusal?: Refusal | null
  /** Options given to every `run` (`deadline`, `priority`, `identity`, ...). */
  run?: RunOptions | null
}

/** A fetch-compatible function over a RateLimiter. */
export interface RatelaneFetch {
  (input: string | URL | Request, init?: RequestInit): Promise<Response>
  /** The RateLimiter it runs on (`close()` it when done). */
  readonly limiter: RateLimiter
}

/**
 * A `fetch` that waits for the rate limits before each request and hands its answers to the
 * core: `new OpenAI({ fetch: ratelaneFetch({ profile: 'openai' }) })`. `limiter`: a
 * RateLimiter, or the options of a new one.
 */
export declare function ratelaneFetch(limiter?: RateLimiter | RateLimiterOptions | null, options?: FetchOptions | null): RatelaneFetch

/** Options of the undici interceptor. */
export interface InterceptorOptions {
  /**
   * The origins it limits (`'https://discord.com'`, or a list), or `'*'` for every origin;
   * requests to any other origin pass untouched. Required.
   */
  origins: string | string[]
  /** Default `'response'`: a refusal is a 429 answer; `'throw'`: `onError` with ratelane's error. */
  refusal?: Refusal | null
  /** As `ratelaneFetch`'s. */
  estimate?: FetchOptions['estimate']
  /** Options given to every `run`. */
  run?: RunOptions | null
}

/** An undici interceptor (`Dispatcher.compose`): `dispatch => (options, handler) => boolean`. */
export interface RatelaneInterceptor {
  (dispatch: (options: any, handler: any) => boolean): (options: any, handler: any) => boolean
  /** The RateLimiter it runs on. */
  readonly limiter: RateLimiter
}

/** `agent.compose(interceptor(limiter, { origins: ['https://discord.com'] }))`. */
export declare function interceptor(limiter: RateLimiter | RateLimiterOptions | null | undefined, options: InterceptorOptions): RatelaneInterceptor

export interface InstallOptions extends InterceptorOptions {
  /** The undici module (default: the application's `undici`, 7 or later). */
  undici?: { getGlobalDispatcher(): any; setGlobalDispatcher(dispatcher: any): void } | null
}

/**
 * Composes the interceptor into undici's global dispatcher (Node's built-in `fetch` uses it
 * too). Returns a function that restores the previous one; it has `limiter` as a property.
 */
export declare function install(limiter: RateLimiter | RateLimiterOptions | null | undefined, options: InstallOptions): (() => void) & { readonly limiter: RateLimiter }

/** Options of `discordRest`. */
export interface DiscordRestOptions {
  /** The HTTP it calls (default: @discordjs/rest's own `makeRequest`, undici's `request`). */
  makeRequest?: ((url: string, init: any) => Promise<any>) | null
  /** Options given to every `run`. */
  run?: RunOptions | null
}

/** REST options for discord.js (`rest:`) and @discordjs/rest (`new REST(...)`). */
export interface DiscordRest {
  makeRequest(url: string, init: any): Promise<any>
  /** Infinity: the global limit is ratelane's alone. */
  globalRequestsPerSecond: number
  /** The RateLimiter it runs on (not enumerable: it never reaches discord.js's options). */
  readonly limiter: RateLimiter
}

/**
 * `new Client({ intents, rest: discordRest(limiter) })`: ratelane under discord.js's own
 * handlers (the global limit at the server, shared through the limiter's store, and the
 * invalid-request budget); discord.js keeps its buckets, sub-limit queue, retries and errors.
 * `limiter`: a RateLimiter with `maxRateLimitRetries: 0, maxErrorRetries: 0`, or the options
 * of a new one.
 */
export declare function discordRest(limiter?: RateLimiter | RateLimiterOptions | null, options?: DiscordRestOptions | null): DiscordRest

/**
 * `onRateLimit` / `onSecondaryRateLimit`, as @octokit/plugin-throttling calls them: the
 * request was refused all the same; true sends it again once the core's pause is over.
 */
export type OctokitRateLimitHook = (retryAfter: number, options: any, octokit: any, retryCount: number) => boolean | Promise<boolean>

/** `throttle` options of `ratelaneOctokit`. */
export interface OctokitThrottleOptions {
  onRateLimit?: OctokitRateLimitHook | null
  onSecondaryRateLimit?: OctokitRateLimitHook | null
  /** false: the plugin does nothing. */
  enabled?: boolean | null
}

/**
 * The Octokit plugin: `Octokit.plugin(ratelaneOctokit)`, then `new MyOctokit({ auth, ratelane:
 * limiterOrOptions, throttle: { onRateLimit, onSecondaryRateLimit } })`. The instance gets
 * `ratelane.limiter`.
 */
export declare function ratelaneOctokit(octokit: any, options: any): { ratelane?: { limiter: RateLimiter } }

/** The options `ratelaneOctokit` reads from Octokit's constructor options. */
export interface RatelaneOctokitOptions {
  /** A RateLimiter of the `github` profile with `maxRateLimitRetries: 0`, or the options of a new one. */
  ratelane?: RateLimiter | RateLimiterOptions | null
  throttle?: OctokitThrottleOptions | null
}
