// A local HTTP server on 127.0.0.1 that answers like Discord's REST API, for the tests and the
// benchmark. The rate limits are the core's simulator (`SimServer`: buckets learned from
// `X-RateLimit-Bucket`, major parameters, the global limit counted on arrival, sub-limits,
// 429 bodies) run in real time, so a client sees the same headers and bodies as from Discord.
//
// With a token budget (the config's `tokens`, an OpenAI-like API's tokens per minute) and
// `costOf`, each request's JSON body says what it really costs: the simulator charges that
// (`SimServer.handle`'s third argument) and an accepted answer's body reports it as `usage`.
//
// It listens on a free port, stops by itself after `lifetimeMs` (default 60 s) and on close().
'use strict'
const http = require('node:http')

/**
 * @param {object} options
 *   config: the simulator's server settings (ratelane::json::server_config_from_json);
 *   latencyMs: delay before each answer (default 0), plus up to jitterMs more at random;
 *   hold: (method, path) => true to never answer (the client must abort);
 *   dropOnce: (method, path, count) => true to destroy the socket instead of answering;
 *   costOf: (body, method, path) => the tokens the request really costs, from its parsed JSON
 *     body (null when it has none or it is not JSON); undefined: the config's `tokens.cost`.
 *     Each answer is then listed in `stats.tokens` as { atNs, tokens, status } (simulator
 *     time: ns since the server started);
 *   lifetimeMs: the server closes itself after this long;
 *   unref: true to let the process exit while the server listens (a stand-in started in
 *     the same process as the program it serves);
 *   SimServer: the simulator's class (default: this package's; the wasm package's tests pass
 *     their own).
 * `stats.byScope` counts the refusals by kind: a 429's `X-RateLimit-Scope` (`global` when
 * `X-RateLimit-Global` is set; for another API's dialect `429`, or `429 tokens` / `429
 * requests` when its body says which budget), or the status of another refusal (`403`: GitHub's).
 */
async function startDiscordServer(options = {}) {
  const SimServer = options.SimServer || require('..').SimServer
  // The simulator's time 0 is `origin`; its wall clock then is the wall clock now (its
  // epoch resets, GitHub's `x-ratelimit-reset` say, are read against the client's clock).
  const origin = performance.now()
  const config = { wall_epoch_ms: Date.now(), ...(options.config || {}) }
  const sim = new SimServer(JSON.stringify(config))
  const stats = { arrivals: 0, byStatus: {}, byScope: {}, aborted: 0, dropped: 0, tokens: [] }
  const latency = options.latencyMs || 0
  const jitter = options.jitterMs || 0
  const sockets = new Set()

  const server = http.createServer((req, res) => {
    const url = new URL(req.url, 'http://127.0.0.1')
    const path = url.pathname
    const method = req.method
    if (path === '/__stats') {
      res.writeHead(200, { 'content-type': 'application/json' })
      res.end(JSON.stringify({ ...stats, count429: sim.count429() }))
      return
    }
    const chunks = []
    req.on('data', (chunk) => chunks.push(chunk))
    req.on('end', () => {
      if (options.hold && options.hold(method, path)) {
        res.on('close', () => { stats.aborted += 1 })
        return
      }
      const answer = () => {
        stats.arrivals += 1
        if (options.dropOnce && options.dropOnce(method, path, stats.arrivals)) {
          stats.dropped += 1
          req.socket.destroy()
          return
        }
        let tokens
        let body = null
        try {
          body = chunks.length > 0 ? JSON.parse(Buffer.concat(chunks).toString('utf8')) : null
        } catch (_) { /* no JSON body */ }
        if (options.costOf) tokens = options.costOf(body, method, path)
        // The body's top-level keys decide its sub-limit class (a channel rename), as Discord's.
        const bodyKeys = body !== null && typeof body === 'object' && !Array.isArray(body) ? Object.keys(body) : null
        const nowNs = Math.round((performance.now() - origin) * 1e6)
        const r = sim.handle(nowNs, { method, path, bodyKeys }, tokens)
        stats.byStatus[r.status] = (stats.byStatus[r.status] || 0) + 1
        if (options.costOf) stats.tokens.push({ atNs: nowNs, tokens, status: r.status })
        const headers = {}
        for (const [name, value] of r.headers) headers[name] = value
        if (r.status === 429 || r.status === 403) {
          const lower = Object.fromEntries(r.headers.map(([name, value]) => [name.toLowerCase(), value]))
          let kind = null // OpenAI's refusal says which budget: `requests` or `tokens`
          try {
            kind = JSON.parse(r.bodyText).error.type
          } catch (_) { /* another dialect's body */ }
          const scope = r.status !== 429 ? String(r.status)
            : lower['x-ratelimit-global'] === 'true' ? 'global'
              : (lower['x-ratelimit-scope'] || (typeof kind === 'string' ? `429 ${kind}` : '429'))
          stats.byScope[scope] = (stats.byScope[scope] || 0) + 1
        }
        res.writeHead(r.status, headers)
        const ok = { id: String(stats.arrivals), ok: true }
        if (r.body.usage) ok.usage = r.body.usage
        res.end(r.status === 200 ? JSON.stringify(ok) : r.bodyText)
      }
      const delay = latency + (jitter > 0 ? Math.random() * jitter : 0)
      if (delay > 0) setTimeout(answer, delay)
      else answer()
    })
  })
  server.on('connection', (socket) => {
    if (options.unref) socket.unref()
    sockets.add(socket)
    socket.on('close', () => sockets.delete(socket))
  })
  server.keepAliveTimeout = 5000
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
  if (options.unref) server.unref()
  const { port } = server.address()
  const stopper = setTimeout(() => close(), options.lifetimeMs || 60_000)
  stopper.unref()
  let closed = null
  function close() {
    if (!closed) {
      clearTimeout(stopper)
      closed = new Promise((resolve) => server.close(() => resolve()))
      for (const s of sockets) s.destroy()
    }
    return closed
  }
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    stats,
    count429: () => sim.count429(),
    close,
  }
}

module.exports = { startDiscordServer }
