// Protecting your own HTTP endpoint with ratelane's server-side limiters (node:http).
//
//   npm install ./bindings-node                 # once, from the repository root (builds with cargo)
//   node examples/node/protect_endpoint.js      # serves, sends itself 7 requests, prints, exits
//   node examples/node/protect_endpoint.js --serve 8080    # keeps serving; try curl -i
//
// Each client IP may make 5 requests per 10 seconds (GCRA: a burst of 5, then one every 2 s).
// Every answer carries the IETF RateLimit fields and the X-RateLimit-* headers; a refused
// request gets 429 with Retry-After. The headers are rendered by the core, not by this file.
'use strict'
const http = require('node:http')
const path = require('node:path')
const { GcraStore } = require(path.join(__dirname, '..', '..', 'bindings-node'))

const SECOND = 1e9
// One store per limit; it keeps at most 100000 client IPs (idle ones are dropped as it goes).
const perClient = GcraStore.perWindow(5, 10 * SECOND, { maxKeys: 100_000 })
// The store's clock: integer nanoseconds from any monotonic epoch.
const nowNs = () => Math.round(performance.now() * 1e6)

function handle(req, res) {
  const decision = perClient.check(req.socket.remoteAddress || 'unknown', nowNs())
  for (const [name, value] of decision.ietfHeaders('per-client')) res.setHeader(name, value)
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
}

async function demo(url) {
  for (let i = 1; i <= 7; i++) {
    const res = await fetch(url)
    await res.arrayBuffer()
    const shown = ['ratelimit', 'x-ratelimit-remaining', 'retry-after']
      .map((name) => `${name}: ${res.headers.get(name) ?? '-'}`)
      .join(', ')
    console.log(`request ${i}: ${res.status}  ${shown}`)
  }
  console.log(`keys tracked: ${perClient.len}`)
}

const server = http.createServer(handle)
const serve = process.argv.indexOf('--serve')
if (serve >= 0) {
  const port = Number(process.argv[serve + 1] || 8080)
  server.listen(port, '127.0.0.1', () => console.log(`listening on http://127.0.0.1:${port}/`))
} else {
  server.listen(0, '127.0.0.1', async () => {
    try {
      await demo(`http://127.0.0.1:${server.address().port}/`)
    } finally {
      server.close()
    }
  })
}
