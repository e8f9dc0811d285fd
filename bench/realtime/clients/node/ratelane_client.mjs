// Scoreboard client: ratelane's Promise driver (RateLimiter, js/driver.js) over one of its two
// JavaScript cores, sending with one of two HTTP stacks.
//
//   node ratelane_client.mjs <workload.json> --core napi|wasm --transport fetch|undici
//
// --core napi:  the Node package built from bindings-node/ (`require('ratelane')`, native addon);
// --core wasm:  the wasm package's Node build, bindings-wasm/pkg/node (`ratelane-wasm` on Node).
//               Same driver file, same API; only the core differs.
// --transport fetch:  Node's global fetch (the undici bundled in Node, its global Agent).
// --transport undici: undici's `request` (the pinned npm version, package.json) over one
//               `new Agent()` of its own, with undici's defaults (unlimited connections per
//               origin, keep-alive, no pipelining). `request` answers `statusCode` and a body
//               stream, so `send` reads the body and hands the driver `{ status, headers, body }`
//               (the driver parses a 429's body from the string: `retry_after`, `global`).
//
// Configuration, as a new user would write it from the README: `new RateLimiter({ globalLimit,
// globalWindow })` with the workload's global limit (global_limit per global_window_s, in ms),
// everything else the core's defaults (Discord header profile, maxWait, bounded retries of 429s
// and 5xx, a POST that may have reached the server is not re-sent). The global limit is the
// core's own: it holds it at the server's limit; interaction callbacks are exempt by route (the
// core's Discord routes), with no option needed. Each request is one `limiter.run(method, path,
// send, { signal })`: the path without the query (the rate-limit route), the URL with `?rid=`,
// the AbortSignal passed through (it cancels a queued request or aborts the one in flight).
// Failures are reported by the driver's `code` (`max_wait_exceeded`, `retries_exhausted`, ...).
//
// Shared mode (the workload file's `shared`, the orchestrator's --processes; napi core only):
// `shared: new RedisStore(url, { prefix, onUnavailable })` from bindings-node/redis.js (the
// package's `ratelane/redis`, over node-redis), as docs/shared-mode.md
// shows, the store's other options at their defaults (timeout 250 ms). The store's `reserve` is
// wrapped to time each reservation Redis answered, from the driver's call to the answer (queue
// and pipeline included), and to count every answer (failures too); the `storeUnavailable`/`storeRecovered` events are counted
// too; all of it goes in the report's `store`.
import { createRequire } from 'node:module'
import { fileURLToPath } from 'node:url'
import path from 'node:path'
import { loadWorkload, requestUrl, runWorkload, warmUp, fail } from './common.mjs'

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../..')
const require = createRequire(import.meta.url)

async function main() {
  const { workload, options } = loadWorkload()
  const core = options.core ?? 'napi'
  const transport = options.transport ?? 'fetch'
  const pkgDir = { napi: path.join(root, 'bindings-node'), wasm: path.join(root, 'bindings-wasm') }[core]
  if (!pkgDir) throw new Error(`--core must be napi or wasm, not ${core}`)
  const ratelane = require(core === 'napi' ? pkgDir : path.join(pkgDir, 'pkg', 'node', 'index.cjs'))
  const version = require(path.join(pkgDir, 'package.json')).version

  const reserveMs = []
  const answers = {}
  const observed = {}
  const grantedAt = [] // wall clock (s) of each grant's answer
  const sentAt = [] // wall clock (s) of each call of the transport
  const wall = () => (performance.timeOrigin + performance.now()) / 1000
  const bump = (table, key) => { table[key] = (table[key] ?? 0) + 1 }
  let store = null
  if (workload.shared) {
    if (core !== 'napi') throw new Error('shared mode: --core napi only (the RedisStore is the Node package\'s)')
    const { RedisStore } = require(path.join(pkgDir, 'redis.js'))
    store = new RedisStore(workload.shared.redis_url, {
      prefix: workload.shared.prefix,
      onUnavailable: workload.shared.on_unavailable,
    })
    const reserve = store.reserve.bind(store)
    store.reserve = (reservation) => {
      const started = performance.now()
      const p = Promise.resolve(reserve(reservation))
      p.then(
        (a) => {
          const kind = a && a.answer === 'denied' ? `denied:${a.scope}` : String(a && a.answer)
          // Only reservations Redis answered are timed (a failure's time is the outage's).
          if (kind === 'granted') grantedAt.push(wall())
          if (kind === 'granted' || kind.startsWith('denied:')) {
            reserveMs.push(Math.round((performance.now() - started) * 1000) / 1000)
          }
          bump(answers, kind)
        },
        () => bump(answers, 'error'),
      )
      return p
    }
  }
  const limiter = new ratelane.RateLimiter({
    globalLimit: workload.global_limit,
    globalWindow: workload.global_window_s * 1000,
    ...(store ? { shared: store } : {}),
  })
  if (store) {
    limiter.on('storeUnavailable', () => bump(observed, 'StoreUnavailable'))
    limiter.on('storeRecovered', () => bump(observed, 'StoreRecovered'))
  }

  let attempt // (request parts) => the driver's `send({ signal })` for them
  let library
  let close = () => limiter.close()
  if (transport === 'fetch') {
    // The Response class and fetch are loaded lazily by Node: load them now, not in the timed part.
    void [fetch, Response, Headers]
    attempt = ({ method, url, headers, body }) => ({ signal }) => fetch(url, { method, headers, body, signal })
    library = `ratelane ${version} (${core}) + fetch (Node ${process.versions.node}, undici ${process.versions.undici})`
  } else if (transport === 'undici') {
    const undici = await import('undici') // only here: importing undici sets the global dispatcher fetch uses
    const undiciVersion = require('undici/package.json').version
    const agent = new undici.Agent()
    attempt = ({ method, url, headers, body }) => async ({ signal }) => {
      const res = await undici.request(url, { method, headers, body, signal, dispatcher: agent })
      return { status: res.statusCode, headers: res.headers, body: await res.body.text() }
    }
    library = `ratelane ${version} (${core}) + undici ${undiciVersion} request`
    close = () => Promise.all([limiter.close(), agent.close()])
  } else {
    throw new Error(`--transport must be fetch or undici, not ${transport}`)
  }

  await warmUp(workload, async (url, headers) => {
    const res = await attempt({ method: 'GET', url, headers })({})
    if (res.arrayBuffer) await res.arrayBuffer()
  })
  await runWorkload({
    client: `ratelane-node-${core}-${transport}`,
    library,
    workload,
    async send(request, signal) {
      const headers = {}
      if (request.auth) headers.Authorization = `Bot ${workload.token}`
      let body
      if (request.json !== null && request.json !== undefined) {
        headers['Content-Type'] = 'application/json'
        body = JSON.stringify(request.json)
      }
      const sendOnce = attempt({ method: request.method, url: requestUrl(workload, request), headers, body })
      const send = (opts) => {
        sentAt.push(wall())
        return sendOnce(opts)
      }
      // As the README shows, nothing but the signal; with the workload's `precise` (the
      // orchestrator's --precise) the body's keys too, which tell a channel rename (its own
      // sub-limit) from other edits.
      const precise = workload.precise && request.json && typeof request.json === 'object'
      const options = precise ? { signal, bodyKeys: request.json } : { signal }
      const res = await limiter.run(request.method, request.path, send, options)
      if (transport === 'fetch') await res.arrayBuffer() // a bot reads the body (frees the connection)
      return res.status
    },
    describeError(error) {
      if (error instanceof ratelane.RatelaneError) {
        return { status: error.response ? error.response.status : null, error: error.code }
      }
      // A transport error the driver passed through (e.g. fetch's TypeError with a cause).
      return { status: null, error: (error && error.cause && error.cause.code) || (error && (error.code || error.name)) || String(error) }
    },
    close,
    storeStats: store
      ? () => ({ reserve_ms: reserveMs, answers, observed, granted_at_unix: grantedAt, sent_at_unix: sentAt })
      : undefined,
  })
}

main().catch(fail)
