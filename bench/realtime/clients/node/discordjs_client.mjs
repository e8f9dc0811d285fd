// Scoreboard client: @discordjs/rest (discord.js's REST manager, the version pinned in
// package.json) as a bot uses it.
//
//   node discordjs_client.mjs <workload.json>
//
// `new REST({ api, version: '10', globalRequestsPerSecond }).setToken(token)`: REST builds
// URLs as `api + '/v' + version + fullRoute + '?' + query`, so `api` is base_url without its
// `/v10`. Each request is the library's own call with the path as `fullRoute` (emoji already
// URL-encoded, as discord.js expects), `body` (JSON), `query: new URLSearchParams({ rid })`,
// `auth: false` for interaction callbacks, and the AbortSignal. It uses
// `rest.queueRequest(...)` then `parseResponse(res)`, which is exactly what `rest.request()`
// does inside, so that the report has the response's real status (request() returns the body).
// Nothing else is set: on Node REST sends with undici's `request` over undici's global Agent.
//
// The global limit: `globalRequestsPerSecond` is the only option, a count per one second.
// It is set to global_limit / global_window_s (floored, at least 1). REST keeps it as a fixed
// one-second window of its own, started by the first request sent once the previous window
// is over (Date.now() based); it knows nothing of the server's window. A 429 with an
// `X-RateLimit-Global` header stops every bucket for its Retry-After; interaction callbacks
// (its BurstHandler) do not count against it.
// Rate limits otherwise: one queue per (bucket hash, major parameter) that sends ONE request at
// a time (each waits for the previous response), with bucket state from X-RateLimit-Remaining
// and X-RateLimit-Reset-After (+ a 50 ms offset). A 429 waits the Retry-After HEADER (whole
// seconds on Discord; the body's retry_after is not read) and is re-sent without limit
// (`rejectOnRateLimit` unset: no RateLimitError). 5xx and network errors (ECONNRESET, its 15 s
// timeout) are retried 3 times, a POST included. Errors: DiscordAPIError (4xx), HTTPError
// (5xx after retries), RateLimitError (never here), reported by class name with their status.
import { createRequire } from 'node:module'
import { REST, version } from '@discordjs/rest'
import { loadWorkload, runWorkload, fail } from './common.mjs'
import { restCalls } from './discordjs_rest.mjs'

const require = createRequire(import.meta.url)

async function main() {
  const { workload } = loadWorkload()
  const api = workload.base_url.replace(/\/v10\/?$/, '')
  const globalRequestsPerSecond = Math.max(1, Math.floor(workload.global_limit / workload.global_window_s))
  const rest = new REST({ api, version: '10', globalRequestsPerSecond }).setToken(workload.token)
  const undiciVersion = require('undici/package.json').version

  await runWorkload({
    client: 'discordjs-rest',
    library: `@discordjs/rest ${version} (undici ${undiciVersion})`,
    workload,
    ...restCalls(rest),
    close() {
      rest.clearHashSweeper()
      rest.clearHandlerSweeper()
    },
  })
}

main().catch(fail)
