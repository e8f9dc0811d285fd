// A CommonJS consumer of the napi package `ratelane`, compiled with tsc --module nodenext
// (`import` becomes `require`) and run by package-node.test.mjs.
import { RateLimiter, RateLimitError, ratelaneFetch } from 'ratelane'
import { RedisStore } from 'ratelane/redis'
import { ratelaneFetch as fromSubpath } from 'ratelane/fetch'

async function main(): Promise<void> {
  const limiter = new RateLimiter({ maxWait: 1000 })
  const response = await limiter.run('GET', '/users/@me', () => ({ status: 200, headers: {} }))
  const checks: Record<string, boolean> = {
    status: response.status === 200,
    errors: typeof RateLimitError === 'function',
    redis: typeof RedisStore === 'function',
    fetch: fromSubpath === ratelaneFetch,
  }
  await limiter.close()
  console.log(JSON.stringify({ form: 'cjs', checks }))
}

void main()
