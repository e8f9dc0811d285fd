#!/usr/bin/env node
// Sustained token-budget run of the Node package (`ratelane`, napi) against a local OpenAI-like
// server, the twin of bench/tokens/run_python.py (the same scenario; a timed measurement, not
// part of the test command).
//
// The server is bindings-node/test/discord-server.cjs over the core's simulator (SimServer) on
// 127.0.0.1: route POST /v1/chat/completions, dialect `openai`, one bucket "chat" of 200
// requests per 6 s fixed window, a token budget {cost: 1000, limit: 100, window_ns: 6e9, kind:
// fixed} = 100,000 tokens per 6 s fixed window, no global limit, ~20 ms before each answer.
// Each request's JSON body says what it really costs (`tokens`), which the simulator charges
// (`SimServer.handle`'s third argument) and reports back as `usage.total_tokens`.
//
// The client: one RateLimiter({ profile: 'openai' }) and `fetch`; all requests are enqueued
// at once (`run`, with `costs: { tokens: estimate }`). Each request's actual cost is uniform in
// [200, 2000] tokens, its estimate round(actual × U(0.5, 1.5)), both drawn from a seeded PRNG
// (mulberry32; run i uses seed + i). Every response body is read by the caller.
//
// Reported per run (one markdown table row):
//   completed / failed: run() resolved with a 200 / rejected;
//   429s: the server's 429 answers;
//   windows: the token windows the server opened (a fixed window starts at the first request
//     it admits after the previous one ended);
//   utilisation: the tokens the server admitted from the first arrival up to the start of the
//     last token window, over 100,000 × (that span / 6 s): how much of the budget the limiter
//     used while it had work queued (the last, partial window is left out);
//   elapsed: wall time from the first enqueue to the last settled request.
//
//   node bench/tokens/run_node.js [--requests 600] [--seed 1] [--runs 1]
'use strict'
const path = require('node:path')

const root = path.join(__dirname, '..', '..')
const { RateLimiter } = require(path.join(root, 'bindings-node'))
const { startDiscordServer } = require(path.join(root, 'bindings-node', 'test', 'discord-server.cjs'))

const CHAT = '/v1/chat/completions'
const WINDOW_NS = 6e9
const BUDGET = 100_000

const SERVER = {
  profile: 'openai',
  dialect: 'openai',
  global: null,
  buckets: { chat: { limit: 200, window_ns: WINDOW_NS, kind: 'fixed' } },
  routes: { [`POST ${CHAT}`]: { bucket: 'chat' } },
  tokens: { cost: 1000, limit: 100, window_ns: WINDOW_NS, kind: 'fixed' },
}

function parseArgs(argv) {
  const options = { requests: 600, seed: 1, runs: 1 }
  for (let i = 0; i < argv.length; i++) {
    const name = argv[i].replace(/^--/, '')
    if (!(name in options) || i + 1 >= argv.length) {
      throw new Error(`usage: run_node.js [--requests N] [--seed S] [--runs R] (got ${argv[i]})`)
    }
    const value = Number(argv[++i])
    if (!Number.isSafeInteger(value) || value < (name === 'seed' ? 0 : 1)) throw new Error(`--${name} must be a whole number`)
    options[name] = value
  }
  return options
}

/** mulberry32: a small seeded PRNG, uniform in [0, 1). */
function prng(seed) {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

function jobs(count, seed) {
  const random = prng(seed)
  return Array.from({ length: count }, () => {
    const actual = 200 + Math.floor(random() * 1801) // uniform over the whole numbers 200..=2000
    return { actual, estimate: Math.round(actual * (0.5 + random())) }
  })
}

/**
 * The server's token windows, rebuilt as the simulator opens them (a fixed window starts at the
 * first request admitted once the previous one ended), and the utilisation up to the last one.
 */
function utilisation(arrivals) {
  const admitted = arrivals.filter((a) => a.status === 200).sort((x, y) => x.atNs - y.atNs)
  const starts = []
  for (const a of admitted) {
    if (starts.length === 0 || a.atNs >= starts[starts.length - 1] + WINDOW_NS) starts.push(a.atNs)
  }
  if (starts.length < 2) return { windows: starts.length, share: null, tokens: 0, spanS: 0 }
  const first = starts[0]
  const last = starts[starts.length - 1]
  const tokens = admitted.filter((a) => a.atNs < last).reduce((sum, a) => sum + a.tokens, 0)
  const span = last - first
  return { windows: starts.length, share: tokens / (BUDGET * (span / WINDOW_NS)), tokens, spanS: span / 1e9 }
}

async function run(requests, seed) {
  const server = await startDiscordServer({
    config: SERVER,
    latencyMs: 20,
    lifetimeMs: 30 * 60_000,
    costOf: (body) => (body && Number.isInteger(body.tokens) ? body.tokens : undefined),
  })
  const limiter = new RateLimiter({ profile: 'openai' })
  const work = jobs(requests, seed)
  let completed = 0
  let failed = 0
  let wrongUsage = 0
  const failures = {}
  const started = performance.now()
  try {
    await Promise.all(work.map(async ({ actual, estimate }) => {
      try {
        const response = await limiter.run('POST', CHAT, ({ signal }) => fetch(server.url + CHAT, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ model: 'bench', tokens: actual }),
          signal,
        }), { costs: { tokens: estimate } })
        const body = await response.json()
        if (response.status === 200) completed++
        else failed++
        if (!body.usage || body.usage.total_tokens !== actual) wrongUsage++
      } catch (error) {
        failed++
        const code = error && error.code ? error.code : String(error)
        failures[code] = (failures[code] || 0) + 1
      }
    }))
  } finally {
    await limiter.close()
    await server.close()
  }
  const elapsedS = (performance.now() - started) / 1e3
  const u = utilisation(server.stats.tokens)
  return {
    requests, seed, completed, failed, failures, wrongUsage,
    count429: server.stats.byStatus[429] || 0,
    arrivals: server.stats.arrivals,
    ...u,
    elapsedS,
    estimated: work.reduce((s, j) => s + j.estimate, 0),
    actual: work.reduce((s, j) => s + j.actual, 0),
  }
}

async function main() {
  const options = parseArgs(process.argv.slice(2))
  console.log(`ratelane Node (napi ${process.version}), fetch; ${options.requests} requests, 100,000 tokens / 6 s, ~20 ms latency`)
  console.log('')
  console.log('| run | seed | requests | completed | failed | server 429s | sends | token windows | tokens admitted before the last window | span (s) | utilisation | elapsed (s) |')
  console.log('| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |')
  for (let i = 0; i < options.runs; i++) {
    const r = await run(options.requests, options.seed + i)
    const share = r.share === null ? 'n/a' : `${(100 * r.share).toFixed(1)} %`
    const failedText = r.failed === 0 ? '0' : `${r.failed} (${Object.entries(r.failures).map(([k, v]) => `${k}: ${v}`).join(', ')})`
    console.log(`| ${i + 1} | ${r.seed} | ${r.requests} | ${r.completed} | ${failedText} | ${r.count429} | ${r.arrivals} | ${r.windows} | ${r.tokens} | ${r.spanS.toFixed(2)} | ${share} | ${r.elapsedS.toFixed(1)} |`)
    if (r.wrongUsage > 0) console.error(`warning: ${r.wrongUsage} bodies did not report the request's own tokens`)
  }
}

main().catch((error) => {
  console.error(error)
  process.exit(1)
})
