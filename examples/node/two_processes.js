// Two bot processes sharing one token's rate limits through Redis.
//
// This script starts a local server that answers like Discord (ratelane's model of Discord's
// rate limits served over HTTP, on 127.0.0.1: messages limited to 5 per second per channel, the
// whole token to 20 requests per second), then forks two worker processes. Each worker is a
// separate Node process with its own RateLimiter, and both share their limits through Redis
// (`shared: new RedisStore(url, ...)` from `ratelane/redis`): together they send 80 messages to
// 2 channels at once, and the server sees no 429. Run with --no-shared to see what happens when
// each process only knows its own requests.
//
//   npm install ./bindings-node redis      # once, from the repository root (builds with cargo)
//   redis-server --port 6379 --save '' &   # or any Redis you may write to
//   node examples/node/two_processes.js redis://127.0.0.1:6379/0
//   node examples/node/two_processes.js redis://127.0.0.1:6379/0 --no-shared
//
// In a real bot, each process just does what `worker` does, with the same Redis and prefix, and
// https://discord.com/api/v10 with the bot token instead of the local server.
'use strict'
const { fork } = require('node:child_process')
const crypto = require('node:crypto')
const path = require('node:path')
const pkg = path.join(__dirname, '..', '..', 'bindings-node')
const { RateLimiter, RateLimitError } = require(pkg)
const { RedisStore } = require(path.join(pkg, 'redis'))

const PER_PROCESS = 40

/** One bot process: its own limiter, limits shared through Redis unless redisUrl is 'none'. */
async function worker(base, redisUrl, prefix, startAt) {
  const store = redisUrl === 'none' ? null : new RedisStore(redisUrl, { prefix, onUnavailable: 'fail_open' })
  const limiter = new RateLimiter({ globalLimit: 20, maxWait: 60_000, shared: store })
  await new Promise((resolve) => setTimeout(resolve, Math.max(0, startAt - Date.now()))) // start together
  const results = await Promise.all(Array.from({ length: PER_PROCESS }, async (_, i) => {
    const p = `/api/v10/channels/${100000000000000000 + (i % 2)}/messages`
    try {
      const response = await limiter.run('POST', p, ({ signal }) =>
        fetch(base + p, { method: 'POST', body: JSON.stringify({ content: i }), headers: { 'content-type': 'application/json' }, signal }))
      await response.arrayBuffer()
      return String(response.status)
    } catch (error) {
      if (error instanceof RateLimitError) return error.code
      throw error
    }
  }))
  await limiter.close() // also writes what is left for Redis and closes the store
  const counts = {}
  for (const r of results) counts[r] = (counts[r] || 0) + 1
  return counts
}

async function main(redisUrl, shared) {
  const { startDiscordServer } = require(path.join(pkg, 'test', 'discord-server.cjs'))
  const server = await startDiscordServer({
    config: {
      buckets: { msg: { limit: 5, window_ns: 1e9 } },
      routes: { 'POST /channels/:id/messages': { bucket: 'msg' } },
      global: { limit: 20, window_ns: 1e9 },
    },
    lifetimeMs: 120_000,
  })
  const prefix = `{ratelane:example:${crypto.randomUUID().slice(0, 8)}}:`
  let reports
  try {
    const startAt = Date.now() + 1500
    reports = await Promise.all([0, 1].map(() => new Promise((resolve, reject) => {
      const child = fork(__filename, ['--worker', server.url, shared ? redisUrl : 'none', prefix, String(startAt)])
      child.on('message', resolve)
      child.on('error', reject)
      child.on('exit', (code) => { if (code !== 0) reject(new Error(`a worker failed (exit ${code})`)) })
    })))
  } finally {
    await server.close()
  }
  reports.forEach((counts, n) => console.log(`process ${n}: ${JSON.stringify(counts)}`))
  const ok = server.stats.byStatus[200] || 0
  const limited = server.count429()
  console.log(`server (${shared ? 'shared through Redis' : 'NOT shared'}): ${ok} x 200, ${limited} x 429`)
  if (shared && (limited !== 0 || ok !== 2 * PER_PROCESS)) {
    throw new Error('unexpected: the processes should have shared their limits')
  }
}

const args = process.argv.slice(2)
const bounded = (ms) => setTimeout(() => { console.error(`two_processes: still running after ${ms / 1000} s`); process.exit(2) }, ms).unref()
if (args[0] === '--worker') {
  bounded(90_000)
  const [, base, url, prefix, at] = args
  worker(base, url, prefix, Number(at)).then((counts) => process.send(counts, () => process.exit(0)), (error) => {
    console.error(error)
    process.exit(1)
  })
} else if (args.length >= 1) {
  bounded(120_000)
  main(args[0], !args.slice(1).includes('--no-shared')).catch((error) => {
    console.error(error.message)
    process.exit(1)
  })
} else {
  console.error('usage: node examples/node/two_processes.js REDIS_URL [--no-shared]')
  process.exit(2)
}
