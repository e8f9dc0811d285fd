// An ES module consumer of the napi package `ratelane` (package-node.test.mjs compiles it with
// tsc --module nodenext --strict and runs the output): every import form the types accept must
// also run.
import ratelane, { RateLimiter, MaxWaitExceededError, RatelaneError, ratelaneFetch, type RateLimiterOptions } from 'ratelane'
import * as namespace from 'ratelane'
import { RedisStore, RedisGcra } from 'ratelane/redis'
import { ratelaneFetch as fromSubpath } from 'ratelane/fetch'

const options: RateLimiterOptions = { maxWait: 1000 }
const limiter = new RateLimiter(options)
const response = await limiter.run('GET', '/users/@me', () => ({ status: 200, headers: {} }))
const status: number = response.status
const fetchFn = ratelaneFetch(limiter, { refusal: 'throw' })
const checks: Record<string, boolean> = {
  status: status === 200,
  default: ratelane.RateLimiter === RateLimiter,
  namespace: namespace.RateLimiter === RateLimiter,
  errors: MaxWaitExceededError.prototype instanceof RatelaneError,
  redis: typeof RedisStore === 'function' && typeof RedisGcra === 'function',
  fetch: fromSubpath === ratelaneFetch && fetchFn.limiter === limiter,
}
await limiter.close()
console.log(JSON.stringify({ form: 'esm', checks }))
