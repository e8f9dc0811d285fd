// A Discord bot's burst of messages through ratelane's Node package.
//
//   npm install ./bindings-node            # once, from the repository root (builds with cargo)
//   node examples/node/discord_bot.js      # against a local server that imitates Discord
//
// With DISCORD_TOKEN and CHANNEL_ID set it posts to that channel on Discord instead.
'use strict'
const path = require('node:path')
const ratelane = require(path.join(__dirname, '..', '..', 'bindings-node'))
const { RateLimiter, RateLimitError, MaxWaitExceededError } = ratelane

async function main() {
  let api = 'https://discord.com/api/v10'
  let channel = process.env.CHANNEL_ID
  let server = null
  if (!process.env.DISCORD_TOKEN || !channel) {
    // A stand-in for Discord on 127.0.0.1: messages to a channel are limited to 5 per 2 s.
    const { startDiscordServer } = require(path.join(__dirname, '..', '..', 'bindings-node', 'test', 'discord-server.cjs'))
    server = await startDiscordServer({
      config: {
        buckets: { '80c17d2f203122d936070c88c8d10f33': { limit: 5, window_ns: 2e9 } },
        routes: { 'POST /channels/:id/messages': { bucket: '80c17d2f203122d936070c88c8d10f33' } },
      },
      latencyMs: 20,
    })
    api = `${server.url}/api/v10`
    channel = '100000000000000001'
    console.log(`no DISCORD_TOKEN/CHANNEL_ID: posting to a local imitation of Discord at ${server.url}`)
  }
  const token = process.env.DISCORD_TOKEN || 'local-token'

  // Discord defaults (50 requests/s global, bucket learning, 429 handling); give up on any
  // request that would wait more than 30 s.
  const limiter = new RateLimiter({ maxWait: 30_000 })
  limiter.on('bucketLearned', ({ route, bucket }) => console.log(`learned: ${route} -> bucket ${bucket}`))
  limiter.on('rateLimited', ({ scope, retryAfter }) => console.log(`429 (${scope}), holding for ${retryAfter.toFixed(0)} ms`))
  limiter.on('invalidRequestWarning', ({ count, limit }) => console.warn(`invalid requests: ${count}/${limit}`))

  const started = performance.now()
  const post = (n) => {
    const route = `/channels/${channel}/messages`
    return limiter.run('POST', route, ({ signal }) => fetch(api + route, {
      method: 'POST',
      headers: { authorization: `Bot ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ content: `message ${n}` }),
      signal, // cancelling the run aborts the HTTP request too
    }), { signal: AbortSignal.timeout(60_000) })
  }

  const results = await Promise.allSettled(Array.from({ length: 12 }, (_, i) => post(i + 1)))
  for (const [i, r] of results.entries()) {
    const t = ((performance.now() - started) / 1000).toFixed(1)
    if (r.status === 'fulfilled') console.log(`message ${i + 1}: HTTP ${r.value.status}`)
    else if (r.reason instanceof MaxWaitExceededError) console.log(`message ${i + 1}: would wait ${r.reason.predictedWait.toFixed(0)} ms, dropped`)
    else if (r.reason instanceof RateLimitError) console.log(`message ${i + 1}: ${r.reason.code}: ${r.reason.message}`)
    else console.log(`message ${i + 1}: ${r.reason}`)
    if (i === results.length - 1) console.log(`all settled after ${t} s`)
  }
  console.log(`ETA for one more message now: ${limiter.predictWait('POST', `/channels/${channel}/messages`).toFixed(0)} ms`)
  await limiter.close()
  if (server) {
    console.log(`the server answered ${server.count429()} 429s`)
    await server.close()
  }
}

main().catch((e) => { console.error(e); process.exitCode = 1 })
