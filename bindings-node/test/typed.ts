// Type-checked (npm run typecheck: tsc --noEmit), not run: the package's public types as a
// user's TypeScript sees them, and the generated native.d.ts checked against the contract.
import {
  ClosedError,
  DeadlineExceededError,
  FAIL_CODES,
  Limiter,
  MaxWaitExceededError,
  DeferredError,
  RateLimitError,
  RateLimiter,
  RatelaneError,
  SimServer,
  Simulation,
  createRatelane,
  GcraStore,
  LeakyBucketStore,
  FixedWindowStore,
  InsufficientCapacityError,
  fromCoreError,
  Metrics,
  instrument,
  type AttachOptions,
  type FailCode,
  type Scheduled,
  type ServerDecision,
  type Output,
  type RateLimitedEvent,
  type RequestSpec,
  type SimReport,
  type SharedStore,
  type StoreUnavailableEvent,
  type Reservation,
  type ReservationAnswer,
  type SharedUpdate,
} from '..'
import { RedisStore, parseAnswer, reserveArgs, recordArgs, SHARED_STORE_LUA, type RedisClientLike, type RedisStoreOptions } from '../redis'
import { metrics as otelMetrics, type Meter } from '@opentelemetry/api'
import type { NativeModule } from '../core'
import { createClient } from 'redis'
import {
  GCRA_LUA,
  OutOfRangeError,
  REDIS_ERROR_CLASSES,
  REDIS_ERROR_CODES,
  RedisBadReplyError,
  RedisBadStateError,
  RedisConnectionError,
  RedisFixedWindow,
  RedisGcra,
  RedisLeakyBucket,
  RedisLimiterError,
  RedisServerError,
  type RedisErrorCode,
  type RedisScheduled,
} from '../redis'
import * as native from '../native'

// The napi module as generated, with the server-side stores of js/server_objects.js (core.cjs),
// satisfies the shared contract of a core module (js/core.d.ts).
const core: NativeModule = { ...native, GcraStore, LeakyBucketStore, FixedWindowStore }
const again = createRatelane(core)
const ctor: typeof RateLimiter = again.RateLimiter
void ctor

async function driver(url: string): Promise<void> {
  const limiter = new RateLimiter({ globalLimit: 50, maxWait: 30_000, deferAfter: null, onRateLimited: (e: RateLimitedEvent) => void e.scope })
  limiter.on('bucketLearned', (e) => console.log(e.route, e.bucket))
  limiter.on('invalidRequestWarning', (e) => console.log(e.count, e.limit))
  const controller = new AbortController()
  try {
    const res: Response = await limiter.run(
      'POST',
      '/channels/123/messages',
      ({ signal }) => fetch(url, { method: 'POST', signal }),
      { signal: controller.signal, deadline: 10_000, deferAfter: 5_000, priority: 1 },
    )
    const body: unknown = await res.json()
    void body
  } catch (e) {
    if (e instanceof MaxWaitExceededError) console.log(e.predictedWait.toFixed(0))
    else if (e instanceof DeferredError) {
      const when: Date = e.retryAtDate
      const epochMs: number = e.retryAtMs
      console.log(when.toISOString(), epochMs, e.retryAt, e.retryAfter)
    }
    else if (e instanceof DeadlineExceededError) console.log(e.predictedSendAt ?? 'unknown')
    else if (e instanceof ClosedError) console.log(e.code)
    else if (e instanceof RateLimitError) {
      const code: FailCode = e.code
      console.log(code, e.attempts, e.response?.status)
    } else if (e instanceof RatelaneError) console.log(e.code)
  }
  try {
    const completion: Response = await limiter.run('POST', '/v1/chat/completions',
      ({ signal }) => fetch(url, { method: 'POST', body: '{}', signal }), { costs: { tokens: 1200, input_tokens: 1000 } })
    void completion
  } catch (e) {
    if (e instanceof InsufficientCapacityError) {
      const dimension: string | null = e.dimension
      const over: number = e.cost - e.limit
      const failure: RateLimitError = e
      console.log(dimension, over, failure.code, e.requested, e.capacity)
    }
  }
  const plain = await limiter.run('GET', '/users/@me', () => ({ status: 200, headers: {} }))
  const status: number = plain.status
  void status
  const wait: number = limiter.predictWait('GET', '/users/@me')
  void wait
  await limiter.close()
}
void driver

function sansIo(): void {
  const limiter = new Limiter(JSON.stringify({ global_limit: 50 }))
  const request: RequestSpec = { method: 'POST', path: '/channels/123/messages' }
  const id: number = limiter.enqueue(0, request)
  for (const out of limiter.drain()) {
    const o: Output = out
    switch (o.type) {
      case 'send': console.log(o.id === id); break
      case 'fail': console.log(o.code, o.message, o.predictedWaitNs, o.dimension, o.cost, o.limit); break
      case 'wait_until': console.log(o.atNs); break
      case 'rate_limited': console.log(o.scope, o.retryAfterNs); break
      default: break
    }
  }
  const disposition: 'complete' | 'retry' | 'failed' = limiter.handleResponse(1, id, { status: 200, headers: [['x-ratelimit-limit', '5']] })
  void disposition
  const costly: RequestSpec = { method: 'POST', path: '/v1/chat/completions', costs: { tokens: 1200 } }
  const other: number = limiter.enqueue(2, costly)
  limiter.handleResponse(3, other, { status: 200, headers: [], body: { usage: { total_tokens: 950 } } })
  const usage: Record<string, number> | undefined = new SimServer('{}').handle(4, costly, 950).body.usage
  void usage
  const codes: readonly FailCode[] = FAIL_CODES
  void codes
  const server = new SimServer('{}')
  console.log(server.handle(0, request).body.retryAfter, server.count429())
  const report: SimReport = new Simulation().run()
  console.log(report.count_429)
}
void sansIo

function serverSide(): void {
  const limits = GcraStore.perWindow(10, 60e9, { maxKeys: 1000 })
  const decision: ServerDecision = limits.check('203.0.113.7', 0)
  const headers: Array<[string, string]> = decision.ietfHeaders('default').concat(decision.xRateLimitHeaders())
  const retry: number | null = decision.retryAfterS
  const legacy = LeakyBucketStore.fromLegacy({ max: 10, durationNs: 60e9, minIntervalNs: 1e9 })
  const scaled = new LeakyBucketStore(3, 1e9, { dripSize: 1 }).checkScaled('user', 0, 0.5)
  const jobs = new FixedWindowStore(10, 10e9)
  const slot: Scheduled = jobs.schedule('guild', 0)
  const released: boolean = jobs.release('guild', slot.releaseAtNs)
  console.log(headers, retry, scaled.allowed, legacy.len, released, limits.untracked + limits.maxKeys)
  try {
    limits.checkN('batch', 0, 11)
  } catch (e) {
    const typed = fromCoreError(e)
    if (typed instanceof InsufficientCapacityError) console.log(typed.requested, typed.capacity)
  }
}
void serverSide

async function redisServerSide(): Promise<void> {
  // ratelane/redis with a node-redis client, as a user's TypeScript sees them.
  const client = await createClient({ url: 'redis://127.0.0.1:6379/0' }).connect()
  const perUser = RedisGcra.perWindow(client, 10, 60e9, { prefix: 'api:per-user:' })
  const decision: ServerDecision = await perUser.check('user-1', { nowNs: 5n })
  const headers: Array<[string, string]> = decision.ietfHeaders('per-user')
  const weighted: ServerDecision = await new RedisGcra(client, 1e9, 5, { prefix: 'w:', minTtlMs: 0 }).checkN('k', 2)
  const bucket = RedisLeakyBucket.fromLegacy(client, { max: 10, durationNs: 60e9, prefix: 'b:' })
  const scaled = await new RedisLeakyBucket(client, 3, 1e9, { dripSize: 1, prefix: 'b:' }).checkScaled('k', 0.5, { nowNs: 0 })
  const jobs = new RedisFixedWindow(client, 10, 10e9, { prefix: 'jobs:' })
  const slot: RedisScheduled = await jobs.schedule('guild')
  const at: bigint = slot.releaseAtNs - slot.nowNs
  const delay: number = slot.delayNs
  const released: boolean = await jobs.release('guild')
  console.log(headers, weighted.remaining, bucket.minIntervalNs, scaled.allowed, at, delay, released, perUser.intervalNs)
  try {
    await perUser.check('user-1')
  } catch (e) {
    if (e instanceof RedisConnectionError) console.log(e.code === 'redis_connection')
    else if (e instanceof RedisLimiterError) {
      const code: RedisErrorCode = e.code
      console.log(code, REDIS_ERROR_CLASSES[code] === RedisBadStateError, e instanceof RatelaneError)
    }
  }
  // @ts-expect-error a key is a string
  await perUser.check(42)
  // @ts-expect-error every limiter needs a prefix
  void new RedisFixedWindow(client, 1, 1e9, {})
  // @ts-expect-error a client needs evalSha and eval
  void new RedisGcra({ get: () => null }, 1e9, 1, { prefix: 'p:' })
  const codes: readonly string[] = REDIS_ERROR_CODES
  const text: string = GCRA_LUA
  console.log(codes, text.length, OutOfRangeError, RedisServerError, RedisBadReplyError)
  await client.close()
}
void redisServerSide
async function sharedMode(client: RedisClientLike): Promise<void> {
  // Redis (ratelane/redis): by URL, or over a node-redis client of the caller's.
  const options: RedisStoreOptions = { prefix: '{ratelane:mybot}:', timeout: 250, onUnavailable: 'fail_closed', retryBase: 100, retryMax: 5000 }
  const byUrl = new RedisStore('redis://127.0.0.1:6379/0', options)
  const byClient = new RedisStore(client, { lease: 30_000, pioneerPoll: 50, stateTtl: 600_000, clientName: 'worker-1' })
  const limiter = new RateLimiter({
    shared: byUrl,
    onStoreUnavailable: (e: StoreUnavailableEvent) => console.log(e.id, e.retryAt),
    onStoreRecovered: () => console.log('recovered'),
  })
  limiter.on('storeUnavailable', (e) => console.log(e.retryAt))
  await limiter.close()
  await byClient.flush(1000)
  console.log(byUrl.dropped, byUrl.prefix, byClient.clientName, byClient.lastError, SHARED_STORE_LUA.length)
  const answer: ReservationAnswer = parseAnswer(['granted'])
  console.log(answer.answer)

  // Any store of the interface works (e.g. in memory, for tests).
  const memory: SharedStore = {
    timeout: 100,
    coreSettings: () => ({ on_unavailable: 'fail_open' }),
    bind: (config: Record<string, unknown>) => void config,
    reserve: async (r: Reservation): Promise<ReservationAnswer> => {
      const args: string[] = reserveArgs(r)
      return args.length > 0 ? { answer: 'granted' } : { answer: 'denied', retryAfterNs: 1e6, scope: 'pioneer' }
    },
    record: (u: SharedUpdate) => void recordArgs(u),
    close: () => undefined,
  }
  await new RateLimiter({ shared: memory }).close()
}
void sharedMode

// OpenTelemetry: a real Meter of @opentelemetry/api (a devDependency here, an optional peer
// dependency of the package) is what instrument and Metrics accept.

function openTelemetry(): void {
  const meter: Meter = otelMetrics.getMeter('ratelane')
  const limiter = new RateLimiter()
  const options: AttachOptions = { name: 'bot' }
  const m: Metrics = instrument(limiter, meter, options)
  m.detach(limiter).attach(limiter)
  new Metrics(meter).attach(new RateLimiter(), {})
}
void openTelemetry

// The adapters (js/adapters/adapters.d.ts) through each entry that exports them.
import { ratelaneFetch as fetchFromSubpath, type FetchOptions, type RatelaneFetch } from '../fetch'
import { interceptor, install, type InterceptorOptions } from '../undici'
import { discordRest, type DiscordRest } from '../discordjs'
import { ratelaneOctokit, type OctokitThrottleOptions, type RatelaneOctokitOptions } from '../octokit'
import { ratelaneFetch } from '..'

async function adapters(): Promise<void> {
  const options: FetchOptions = { refusal: 'throw', estimate: ({ body }) => (body === null ? null : { tokens: 10, model: 'm' }) }
  const f: RatelaneFetch = ratelaneFetch({ profile: 'openai' }, options)
  const res: Response = await f('https://api.openai.com/v1/models', { method: 'GET' })
  void res
  await fetchFromSubpath(f.limiter).limiter.close()
  const io: InterceptorOptions = { origins: ['https://discord.com'], refusal: 'response' }
  const intercept = interceptor(new RateLimiter(), io)
  const limiter: RateLimiter = intercept.limiter
  void limiter
  const uninstall = install({ profile: 'ietf' }, { origins: '*' })
  uninstall()
  const rest: DiscordRest = discordRest({ maxWait: 30_000 }, { run: { priority: 1 } })
  const n: number = rest.globalRequestsPerSecond
  void n
  const throttle: OctokitThrottleOptions = { onRateLimit: (after, _o, _k, count) => after < 60 && count < 2 }
  const octokitOptions: RatelaneOctokitOptions = { ratelane: { profile: 'github' }, throttle }
  void octokitOptions
  void ratelaneOctokit
}
void adapters
