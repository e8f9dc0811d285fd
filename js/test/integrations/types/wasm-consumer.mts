// An ES module consumer of `ratelane-wasm` (package-wasm.test.mjs compiles it with tsc --module
// nodenext --strict and runs the output).
import init, { RateLimiter, ratelaneFetch, RatelaneError, MaxWaitExceededError } from 'ratelane-wasm'
import * as web from 'ratelane-wasm/web'

await init()
const limiter = new RateLimiter({ maxWait: 1000 })
const response = await limiter.run('GET', '/users/@me', () => ({ status: 200, headers: {} }))
const viaFetch = ratelaneFetch(limiter, { fetch: async () => new Response('{}', { status: 200 }) })
const answer: Response = await viaFetch('https://discord.com/api/v10/users/@me')
const checks: Record<string, boolean> = {
  status: response.status === 200 && answer.status === 200,
  errors: MaxWaitExceededError.prototype instanceof RatelaneError,
  web: typeof web.initSync === 'function' && typeof web.ratelaneFetch === 'function',
}
await limiter.close()
console.log(JSON.stringify({ form: 'esm', checks }))
