// Protecting your own HTTP endpoint with a limit kept in Redis (node:http).
//
// Each client IP may make 5 requests per 10 seconds (GCRA: a burst of 5, then one every 2 s).
// The count lives in Redis (`require('ratelane/redis').RedisGcra`: one Lua script call per
// request, on Redis's clock), so every process and machine serving this endpoint with the same
// Redis and prefix enforces one shared limit. Every answer carries the IETF RateLimit fields
// and the X-RateLimit-* headers; a refused request gets 429 with Retry-After. The headers are
// rendered by ratelane's core, not by this file.
//
//   npm install ./bindings-node redis          # once, from the repository root (builds with cargo)
//   redis-server --port 6379 --save '' &       # or any Redis you may write to
//   node examples/node/protect_endpoint_redis.js redis://127.0.0.1:6379/0
//       # serves on a free port of 127.0.0.1, sends itself 7 requests, prints them, exits
//   node examples/node/protect_endpoint_redis.js redis://127.0.0.1:6379/0 --serve 8080
//       # keeps serving; try curl -i http://127.0.0.1:8080/ (several copies of this server on
//       # other ports share the limit)
//
// When Redis cannot decide (down, unreachable), this endpoint fails open: it serves the
// request without rate-limit headers and logs why. Answer 503 there instead to fail closed.
'use strict'
const crypto = require('node:crypto')
const http = require('node:http')
const path = require('node:path')

const bindingsNode = path.join(__dirname, '..', '..', 'bindings-node')
// In your project: require('ratelane/redis') and require('redis').
const { RedisGcra, RedisLimiterError } = require(path.join(bindingsNode, 'redis'))
const { createClient } = requireRedis()

const SECOND = 1e9
const POLICY = 'per-client'

/** node-redis: your project's (`npm install redis`), else the one bindings-node has for its tests. */
function requireRedis() {
  try {
    return require('redis')
  } catch (_) {
    return require(require.resolve('redis', { paths: [bindingsNode] }))
  }
}

/** The server: one endpoint, limited per client IP by `perClient` (a RedisGcra). */
function makeServer(perClient) {
  return http.createServer(async (req, res) => {
    let decision
    try {
      decision = await perClient.check(req.socket.remoteAddress || 'unknown')
    } catch (error) {
      if (!(error instanceof RedisLimiterError)) throw error
      // The limiter could not decide (error.code: redis_connection, redis_server...).
      console.error(`rate limit unavailable, serving anyway: ${error.message} (${error.code})`)
      res.writeHead(200, { 'content-type': 'application/json' })
      res.end(JSON.stringify({ hello: 'world' }))
      return
    }
    for (const [name, value] of decision.ietfHeaders(POLICY)) res.setHeader(name, value)
    for (const [name, value] of decision.xRateLimitHeaders()) {
      if (name !== 'Retry-After') res.setHeader(name, value) // sent once, by the IETF set
    }
    if (!decision.allowed) {
      res.writeHead(429, { 'content-type': 'application/json' })
      res.end(JSON.stringify({ error: 'rate limited', retryAfterSeconds: decision.retryAfterS }))
      return
    }
    res.writeHead(200, { 'content-type': 'application/json' })
    res.end(JSON.stringify({ hello: 'world', remaining: decision.remaining }))
  })
}

function listen(server, port) {
  return new Promise((resolve, reject) => {
    server.once('error', reject)
    server.listen(port, '127.0.0.1', () => resolve(server.address().port))
  })
}

async function demo(url) {
  let admitted = 0
  for (let i = 1; i <= 7; i++) {
    const res = await fetch(url)
    await res.arrayBuffer()
    if (res.status === 200) admitted += 1
    const shown = ['RateLimit', 'X-RateLimit-Remaining', 'Retry-After']
      .map((name) => `${name}: ${res.headers.get(name) ?? '-'}`)
      .join(', ')
    console.log(`request ${i}: ${res.status}  ${shown}`)
  }
  return admitted
}

async function main(redisUrl, servePort) {
  // No offline queue: while Redis is unreachable a check fails at once (redis_connection) and
  // the endpoint fails open, instead of waiting for a reconnection.
  const client = createClient({ url: redisUrl, disableOfflineQueue: true, socket: { connectTimeout: 500 } })
  client.on('error', (error) => console.error(`redis: ${error.message}`))
  await client.connect()
  // One prefix per limiter. The demo takes a fresh one so that each run starts empty.
  const prefix = servePort ? 'example:per-client:' : `example:${crypto.randomBytes(4).toString('hex')}:per-client:`
  const perClient = RedisGcra.perWindow(client, 5, 10 * SECOND, { prefix })
  const server = makeServer(perClient)
  const port = await listen(server, servePort)
  if (servePort) {
    console.log(`listening on http://127.0.0.1:${port}/ (limits in ${redisUrl}, keys ${prefix}*)`)
    return
  }
  try {
    const admitted = await demo(`http://127.0.0.1:${port}/`)
    console.log(`${admitted} of 7 requests admitted, counted in Redis under ${prefix}* (5 per 10 s per client IP)`)
  } finally {
    server.close()
    await client.close()
  }
}

module.exports = { makeServer, listen }

if (require.main === module) {
  const args = process.argv.slice(2)
  if (args.length < 1 || args[0].startsWith('--')) {
    console.error('usage: node protect_endpoint_redis.js REDIS_URL [--serve PORT]')
    process.exit(2)
  }
  const at = args.indexOf('--serve')
  const port = at >= 0 ? Number(args[at + 1] || 8080) : 0
  main(args[0], port).catch((error) => {
    console.error(error)
    process.exit(1)
  })
}
