// A CommonJS consumer of `ratelane-wasm`, compiled with tsc --module nodenext and run by
// package-wasm.test.mjs.
import { RateLimiter, ratelaneFetch } from 'ratelane-wasm'

async function main(): Promise<void> {
  const limiter = new RateLimiter({ maxWait: 1000 })
  const response = await limiter.run('GET', '/users/@me', () => ({ status: 200, headers: {} }))
  const checks: Record<string, boolean> = {
    status: response.status === 200,
    fetch: ratelaneFetch(limiter).limiter === limiter,
  }
  await limiter.close()
  console.log(JSON.stringify({ form: 'cjs', checks }))
}

void main()
