// Scoreboard client: @discordjs/rest (the version pinned in package.json) with ratelane under
// it, as the README of the Node package shows (`ratelane/discordjs`, issue 47):
//
//   node discordjs_ratelane_client.mjs <workload.json>
//
// `new REST({ api, version: '10', ...discordRest(limiterOptions, { makeRequest }) })`: REST's
// own handlers, queues, retries and errors exactly as in discordjs_client.mjs, with ratelane in
// its `makeRequest` (the one discord.js calls for each attempt). The limiter: the workload's
// global limit (`globalLimit`, `globalWindow`), everything else the core's defaults, and no
// retries of its own (the adapter sets `maxRateLimitRetries: 0, maxErrorRetries: 0`: every 429
// and 5xx goes back to discord.js). `discordRest` also sets `globalRequestsPerSecond: Infinity`,
// so the global limit is ratelane's alone (held at the server). The HTTP is @discordjs/rest's
// own default (`DefaultRestOptions.makeRequest`: undici's `request`), passed explicitly so that
// both discord.js clients use the same one. Requests are submitted and errors reported as
// discordjs_client.mjs does (discordjs_rest.mjs).
import { createRequire } from 'node:module'
import { fileURLToPath } from 'node:url'
import path from 'node:path'
import { REST, DefaultRestOptions, version } from '@discordjs/rest'
import { loadWorkload, runWorkload, fail } from './common.mjs'
import { restCalls } from './discordjs_rest.mjs'

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../..')
const require = createRequire(import.meta.url)

async function main() {
  const { workload } = loadWorkload()
  const { discordRest } = require(path.join(root, 'bindings-node', 'discordjs.js'))
  const ratelaneVersion = require(path.join(root, 'bindings-node', 'package.json')).version
  const api = workload.base_url.replace(/\/v10\/?$/, '')
  const options = discordRest(
    { globalLimit: workload.global_limit, globalWindow: workload.global_window_s * 1000 },
    { makeRequest: DefaultRestOptions.makeRequest },
  )
  const rest = new REST({ api, version: '10', ...options }).setToken(workload.token)
  const undiciVersion = require('undici/package.json').version

  await runWorkload({
    client: 'discordjs-ratelane',
    library: `@discordjs/rest ${version} (undici ${undiciVersion}) + ratelane ${ratelaneVersion} (ratelane/discordjs)`,
    workload,
    ...restCalls(rest),
    async close() {
      rest.clearHashSweeper()
      rest.clearHandlerSweeper()
      await options.limiter.close()
    },
  })
}

main().catch(fail)
