// One bot process of the multi-process tests (shared_redis.test.js): its own RateLimiter,
// sharing limits through Redis unless REDIS_URL is "none", sends N messages to the local
// Discord-like server and prints what happened as one JSON line. Bounded: it gives up
// (exit 2) after 90 s.
//
//   node shared_worker.cjs BASE_URL REDIS_URL|none PREFIX N START_AT_EPOCH_MS GLOBAL_LIMIT
'use strict'
const { RateLimiter, RateLimitError } = require('..')
const { RedisStore } = require('../redis')

async function main([base, redisUrl, prefix, n, startAt, globalLimit]) {
  const store = redisUrl === 'none' ? null : new RedisStore(redisUrl, { prefix, timeout: 1000 })
  const observed = []
  const limiter = new RateLimiter({
    globalLimit: Number(globalLimit),
    globalWindow: 1000,
    maxWait: 60_000,
    shared: store,
    onStoreUnavailable: () => observed.push('storeUnavailable'),
    onStoreRecovered: () => observed.push('storeRecovered'),
  })
  // Start together with the other processes (they take different times to load).
  await new Promise((resolve) => setTimeout(resolve, Math.max(0, Number(startAt) - Date.now())))
  const results = await Promise.all(Array.from({ length: Number(n) }, async (_, i) => {
    const path = `/api/v10/channels/${100000000000000000 + (i % 4)}/messages`
    try {
      const response = await limiter.run('POST', path, ({ signal }) =>
        fetch(base + path, { method: 'POST', body: JSON.stringify({ i }), headers: { 'content-type': 'application/json' }, signal }))
      await response.arrayBuffer()
      return String(response.status)
    } catch (error) {
      if (error instanceof RateLimitError) return error.code
      throw error
    }
  }))
  await limiter.close()
  return { results, observed, dropped: store ? store.dropped : 0 }
}

const guard = setTimeout(() => {
  process.stderr.write('shared_worker: still running after 90 s\n')
  process.exit(2)
}, 90_000)
guard.unref()
main(process.argv.slice(2)).then(
  (report) => { process.stdout.write(JSON.stringify(report) + '\n') },
  (error) => {
    process.stderr.write(`shared_worker: ${error && error.stack}\n`)
    process.exit(1)
  },
)
