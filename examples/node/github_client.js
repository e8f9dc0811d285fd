// A GitHub REST client through ratelane's Node package, with the `github` provider pack.
//
//   npm install ./bindings-node            # once, from the repository root (builds with cargo)
//   node examples/node/github_client.js    # against a local server that imitates GitHub
//
// With GITHUB_TOKEN set it lists issues of GITHUB_REPO (default `rust-lang/rust`) on
// api.github.com instead.
//
// What the `github` pack reads: `x-ratelimit-limit/remaining/used/reset` and
// `x-ratelimit-resource` (the budget a route spends: `core`, `search`, ...; learned from each
// route's first answer); a 403 or 429 that says `remaining: 0` (the primary limit) or gives
// `retry-after` / the secondary-limit message (a secondary limit, which pauses the whole token)
// is a rate limit: the request is retried when the wait is over, never handed back as an error.
// A plain 403 (no permission) is handed back to the caller as the response it is.
'use strict'
const path = require('node:path')
const ratelane = require(path.join(__dirname, '..', '..', 'bindings-node'))
const { RateLimiter, RateLimitError } = ratelane

async function main() {
  let api = 'https://api.github.com'
  let repo = process.env.GITHUB_REPO || 'rust-lang/rust'
  let server = null
  if (!process.env.GITHUB_TOKEN) {
    // A stand-in for GitHub on 127.0.0.1, windows scaled down so that the example takes
    // seconds: the `core` budget is 12 requests per 2 s, `search` 3 per 2 s, and a hidden
    // secondary limit of 10 requests per second over all budgets. GitHub answers a secondary
    // limit with a 403, `retry-after` and a message saying so: the first burst (12 + 3) meets
    // it once, the engine holds the whole token for the `retry-after`, and from what the
    // token was admitted in that second it keeps to 10 per second afterwards.
    const { startDiscordServer } = require(path.join(__dirname, '..', '..', 'bindings-node', 'test', 'discord-server.cjs'))
    repo = 'octo-org/hello-world'
    server = await startDiscordServer({
      config: {
        profile: 'github',
        dialect: 'github',
        buckets: {
          core: { limit: 12, window_ns: 2e9 },
          search: { limit: 3, window_ns: 2e9 },
        },
        routes: {
          [`GET /repos/${repo}/issues/:id`]: { bucket: 'core' },
          'GET /search/issues': { bucket: 'search' },
        },
        global: { limit: 10, window_ns: 1e9 },
      },
      latencyMs: 20,
    })
    api = server.url
    console.log(`no GITHUB_TOKEN: calling a local imitation of GitHub at ${server.url}`)
  }
  const headers = {
    accept: 'application/vnd.github+json',
    'x-github-api-version': '2022-11-28',
    ...(process.env.GITHUB_TOKEN ? { authorization: `Bearer ${process.env.GITHUB_TOKEN}` } : {}),
  }

  // The GitHub pack; everything else at its default (429s and secondary limits retried up to
  // 3 times, a request fails instead of waiting more than 60 s).
  const limiter = new RateLimiter({ profile: 'github', maxWait: 60_000 })
  const seen = { learned: [], limited: {} }
  limiter.on('bucketLearned', ({ route, bucket }) => {
    seen.learned.push(`${route} -> ${bucket}`)
    console.log(`learned: ${route} spends the "${bucket}" budget`)
  })
  limiter.on('rateLimited', ({ scope, retryAfter }) => {
    seen.limited[scope] = (seen.limited[scope] || 0) + 1
    console.log(`rate limited (${scope}): holding for ${retryAfter.toFixed(0)} ms`)
  })

  const get = (route) =>
    limiter.run('GET', route, ({ signal }) => fetch(api + route, { headers, signal }))

  const started = performance.now()
  const issues = Array.from({ length: 30 }, (_, i) => `/repos/${repo}/issues/${i + 1}`)
  const searches = ['bug', 'docs', 'perf', 'crash', 'flaky'].map((q) => `/search/issues?q=repo:${repo}+${q}`)
  const results = await Promise.allSettled([...issues, ...searches].map(get))

  const statuses = {}
  for (const r of results) {
    let key
    if (r.status === 'fulfilled') {
      key = `HTTP ${r.value.status}`
      await r.value.arrayBuffer() // read (and release) every body
    } else if (r.reason instanceof RateLimitError) {
      key = r.reason.code
    } else {
      key = String(r.reason)
    }
    statuses[key] = (statuses[key] || 0) + 1
  }
  const seconds = ((performance.now() - started) / 1000).toFixed(1)
  console.log(`${issues.length} issues and ${searches.length} searches in ${seconds} s: ${JSON.stringify(statuses)}`)
  console.log(`rate limits met: ${JSON.stringify(seen.limited)}`)
  if (server) {
    const byStatus = server.stats.byStatus
    console.log(`server: ${byStatus[200] || 0} x 200, ${byStatus[403] || 0} x 403, ${byStatus[429] || 0} x 429`)
    await server.close()
  }
  await limiter.close()
}

main().catch((err) => {
  console.error(err)
  process.exit(1)
})
