// Benchmark of the ratelane Node package (command in BENCHMARKS.md; `--micro`: part 1 only):
//
//  1. cost per request of the sans-IO API (Limiter: enqueue, drain, handleResponse, drain; the
//     same through the positional surface enqueueParts, drainInto, respond), of the least any
//     Promise driver over that surface does (the floor: one Promise around those four calls and
//     two clock reads, the same batches as the driver's) and of the Promise driver
//     (RateLimiter.run with an in-process response), no HTTP;
//  2. the same Discord workloads sent through ratelane's driver + fetch and through
//     @discordjs/rest, one after the other in this process, each against its own fresh copy of
//     the local Discord-like server (../test/discord-server.cjs, run in a child process so only
//     the client's CPU is measured): makespan, 429s received, client CPU per request.
'use strict'
const { spawn } = require('node:child_process')
const path = require('node:path')
const { Limiter, RateLimiter } = require('..')
// The core module itself: the positional surface the driver calls (js/CONTRACT.md).
const native = require('../ratelane.node')
const { REST } = require('@discordjs/rest')
const undici = require('undici') // @discordjs/rest's own HTTP client, for a like-for-like row

const MS = 1e6

function cpuMs(start) {
  const d = process.cpuUsage(start)
  return (d.user + d.system) / 1000
}

// ------------------------------------------------------------------ 1. per-request cost

function sansIo(n) {
  const limiter = new Limiter(JSON.stringify({ global_limit: 0 }))
  const headers = [
    ['X-RateLimit-Limit', '1000000'], ['X-RateLimit-Remaining', '999999'],
    ['X-RateLimit-Reset-After', '60'], ['X-RateLimit-Bucket', 'bench'], ['Content-Type', 'application/json'],
  ]
  const response = { status: 200, headers, wallClockMs: Date.now() }
  let now = 0
  const run = (count) => {
    for (let i = 0; i < count; i++) {
      now += 1000
      const id = limiter.enqueue(now, { method: 'POST', path: '/channels/100000000000000001/messages' })
      const out = limiter.drain()
      if (out[0].type !== 'send' || out[0].id !== id) throw new Error(`unexpected ${JSON.stringify(out)}`)
      limiter.handleResponse(now + 500, id, response)
      limiter.drain()
    }
  }
  run(Math.min(n, 20_000)) // warm-up
  const cpu = process.cpuUsage()
  const t0 = process.hrtime.bigint()
  run(n)
  const wallNs = Number(process.hrtime.bigint() - t0)
  return { perRequestNs: wallNs / n, cpuPerRequestUs: (cpuMs(cpu) * 1000) / n }
}

/** The same request life through the positional surface the driver uses (js/CONTRACT.md). */
function sansIoFast(n) {
  const limiter = new native.Limiter(JSON.stringify({ global_limit: 0 }))
  const lines = [
    'X-RateLimit-Limit', '1000000', 'X-RateLimit-Remaining', '999999',
    'X-RateLimit-Reset-After', '60', 'X-RateLimit-Bucket', 'bench', 'Content-Type', 'application/json',
  ].join('\n')
  const wallClockMs = Date.now()
  const out = new Float64Array(32)
  let now = 0
  const run = (count) => {
    for (let i = 0; i < count; i++) {
      now += 1000
      const id = limiter.enqueueParts(now, 'POST', '/channels/100000000000000001/messages')
      limiter.drainInto(out)
      if (out[0] !== 0 || out[1] !== id) throw new Error(`unexpected ${out}`)
      limiter.respond(now + 500, id, 200, lines, wallClockMs)
      const n = limiter.drainInto(out)
      if (out[n - 2] === 3) { limiter.takeHeld(); limiter.drainInto(out) } // bucket_learned, the first time
    }
  }
  run(Math.min(n, 20_000)) // warm-up
  const cpu = process.cpuUsage()
  const t0 = process.hrtime.bigint()
  run(n)
  const wallNs = Number(process.hrtime.bigint() - t0)
  return { perRequestNs: wallNs / n, cpuPerRequestUs: (cpuMs(cpu) * 1000) / n }
}

/**
 * Per request figures of `life()` (a Promise per request) run n times in batches of 100
 * concurrent ones, after a warm-up.
 */
async function inBatches(n, life) {
  const run = async (count) => {
    for (let i = 0; i < count; i += 100) {
      const runs = []
      for (let j = 0; j < 100; j++) runs.push(life())
      await Promise.all(runs)
    }
  }
  await run(Math.min(n, 20_000))
  const cpu = process.cpuUsage()
  const t0 = process.hrtime.bigint()
  await run(n)
  const wallNs = Number(process.hrtime.bigint() - t0)
  return { perRequestNs: wallNs / n, cpuPerRequestUs: (cpuMs(cpu) * 1000) / n }
}

/**
 * The least a Promise driver over the positional surface does per request: a Promise, the
 * clock read, enqueueParts and drainInto, the response awaited, the clock again, respond and
 * drainInto; no timers, retries or errors. What RateLimiter.run can at best come down to.
 */
async function floor(n) {
  const limiter = new native.Limiter(JSON.stringify({ global_limit: 0 }))
  const lines = [
    'x-ratelimit-limit', '1000000', 'x-ratelimit-remaining', '999999', 'x-ratelimit-reset-after', '60', 'x-ratelimit-bucket', 'bench',
  ].join('\n')
  const response = { status: 200, headers: lines }
  const send = () => response
  const nowNs = () => Number(process.hrtime.bigint())
  const out = new Float64Array(32)
  const life = (method, path) => new Promise((resolve) => {
    const id = limiter.enqueueParts(nowNs(), method, path)
    limiter.drainInto(out)
    Promise.resolve(send()).then((answer) => {
      limiter.respond(nowNs(), id, answer.status, answer.headers, 0)
      const n = limiter.drainInto(out)
      if (out[n - 2] === 3) { limiter.takeHeld(); limiter.drainInto(out) } // bucket_learned, the first time
      resolve(answer)
    })
  })
  return inBatches(n, () => life('POST', '/channels/100000000000000001/messages'))
}

async function driverOnly(n) {
  const limiter = new RateLimiter({ globalLimit: 0 })
  const response = {
    status: 200,
    headers: { 'x-ratelimit-limit': '1000000', 'x-ratelimit-remaining': '999999', 'x-ratelimit-reset-after': '60', 'x-ratelimit-bucket': 'bench' },
  }
  const send = () => response
  const figures = await inBatches(n, () => limiter.run('POST', '/channels/100000000000000001/messages', send))
  await limiter.close()
  return figures
}

// ------------------------------------------------------------------ 2. against the server

function startServer(options) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [path.join(__dirname, 'server-process.cjs'), JSON.stringify(options)], { stdio: ['pipe', 'pipe', 'inherit'] })
    child.stdout.setEncoding('utf8')
    child.stdout.once('data', (line) => {
      const url = line.trim()
      resolve({
        url,
        stats: async () => (await fetch(`${url}/__stats`)).json(),
        stop: () => new Promise((r) => { child.once('exit', r); child.stdin.end() }),
      })
    })
    child.once('error', reject)
  })
}

/** The workloads: [name, server options, list of channel ids (one entry per message)]. */
function workloads() {
  const burst = []
  for (let c = 0; c < 4; c++) for (let i = 0; i < 25; i++) burst.push(String(200000000000000000n + BigInt(c)))
  const spread = []
  for (let c = 0; c < 150; c++) spread.push(String(300000000000000000n + BigInt(c)))
  const bucketConfig = {
    buckets: { msg: { limit: 5, window_ns: 1000 * MS } },
    routes: { 'POST /channels/:id/messages': { bucket: 'msg' } },
  }
  return [
    ['burst: 100 messages to 4 channels (bucket 5/s per channel)', { config: bucketConfig, latencyMs: 5, jitterMs: 20 }, burst],
    ['spread: 150 messages to 150 channels (global 50/s)', { config: bucketConfig, latencyMs: 5, jitterMs: 20 }, spread],
    ['spread, uneven latency: 150 messages to 150 channels (global 50/s)', { config: bucketConfig, latencyMs: 10, jitterMs: 150 }, spread],
  ]
}

async function viaRatelane(url, channels) {
  const limiter = new RateLimiter()
  const body = JSON.stringify({ content: 'hello' })
  const results = await Promise.allSettled(channels.map((channel) => {
    const p = `/api/v10/channels/${channel}/messages`
    return limiter.run('POST', p, ({ signal }) => fetch(url + p, {
      method: 'POST', body, signal, headers: { 'content-type': 'application/json', authorization: 'Bot x' },
    })).then(async (res) => { await res.arrayBuffer(); return res.status })
  }))
  await limiter.close()
  return results
}

/** ratelane's driver with undici.request, the HTTP client @discordjs/rest itself uses. */
async function viaRatelaneUndici(url, channels) {
  const limiter = new RateLimiter()
  const body = JSON.stringify({ content: 'hello' })
  const results = await Promise.allSettled(channels.map((channel) => {
    const p = `/api/v10/channels/${channel}/messages`
    return limiter.run('POST', p, async ({ signal }) => {
      const res = await undici.request(url + p, {
        method: 'POST', body, signal, headers: { 'content-type': 'application/json', authorization: 'Bot x' },
      })
      return { status: res.statusCode, headers: res.headers, body: await res.body.text() }
    }).then((res) => res.status)
  }))
  await limiter.close()
  return results
}

async function viaDiscordjs(url, channels) {
  const rest = new REST({ version: '10', api: `${url}/api` }).setToken('x')
  const results = await Promise.allSettled(channels.map((channel) =>
    rest.post(`/channels/${channel}/messages`, { body: { content: 'hello' } }).then(() => 200)))
  rest.clearHashSweeper()
  rest.clearHandlerSweeper()
  return results
}

async function measure(client, server, channels) {
  const cpu = process.cpuUsage()
  const t0 = performance.now()
  const results = await client(server.url, channels)
  const makespanMs = performance.now() - t0
  const clientCpuMs = cpuMs(cpu)
  const stats = await server.stats()
  const delivered = results.filter((r) => r.status === 'fulfilled' && r.value === 200).length
  return {
    delivered: `${delivered}/${channels.length}`,
    makespanS: +(makespanMs / 1000).toFixed(2),
    throughputPerS: +(delivered / (makespanMs / 1000)).toFixed(1),
    received429: stats.count429,
    arrivals: stats.arrivals,
    clientCpuPerRequestMs: +(clientCpuMs / channels.length).toFixed(3),
  }
}

async function main() {
  const n = Number(process.env.BENCH_N || 200_000)
  console.log(`node ${process.version}; ${n} requests per micro-benchmark`)
  const s = sansIo(n)
  const f = sansIoFast(n)
  const fl = await floor(Math.round(n / 4))
  const d = await driverOnly(Math.round(n / 4))
  console.log('\nper request, no HTTP (one bucket, no waits):')
  console.table({
    'sans-IO Limiter (enqueue, drain, handleResponse, drain)': { wallUs: +(s.perRequestNs / 1000).toFixed(2), cpuUs: +s.cpuPerRequestUs.toFixed(2) },
    'sans-IO positional (enqueueParts, drainInto, respond, drainInto)': { wallUs: +(f.perRequestNs / 1000).toFixed(2), cpuUs: +f.cpuPerRequestUs.toFixed(2) },
    'floor: one Promise around the four positional calls': { wallUs: +(fl.perRequestNs / 1000).toFixed(2), cpuUs: +fl.cpuPerRequestUs.toFixed(2) },
    'RateLimiter.run (driver, in-process response)': { wallUs: +(d.perRequestNs / 1000).toFixed(2), cpuUs: +d.cpuPerRequestUs.toFixed(2) },
  })
  if (process.argv.includes('--micro')) return // part 1 only
  for (const [name, options, channels] of workloads()) {
    const rows = {}
    for (const [label, client] of [['ratelane + fetch', viaRatelane], ['ratelane + undici.request', viaRatelaneUndici], ['@discordjs/rest 2.6.3', viaDiscordjs]]) {
      const server = await startServer(options)
      try {
        rows[label] = await measure(client, server, channels)
      } finally {
        await server.stop()
      }
    }
    console.log(`\n${name}; server latency ${options.latencyMs}-${options.latencyMs + options.jitterMs} ms:`)
    console.table(rows)
  }
}

main().then(() => process.exit(0), (e) => { console.error(e); process.exit(1) })
