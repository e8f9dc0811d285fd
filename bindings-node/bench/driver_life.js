// The Promise driver's request life, N times (argv[2], default 100,000): RateLimiter.run with an
// in-process response, in batches of 100, as the `driverOnly` loop of bench.js. Run under
// callgrind twice (two N) to count the instructions of one request without the start-up's
// (the command is in BENCHMARKS.md, "Node package", "Per request, no HTTP"): a count,
// unlike a timing, does not move with the machine's load.
'use strict'
const { RateLimiter } = require('..')

async function main() {
  const n = Number(process.argv[2] || 100_000)
  const limiter = new RateLimiter({ globalLimit: 0 })
  const response = {
    status: 200,
    headers: { 'x-ratelimit-limit': '1000000', 'x-ratelimit-remaining': '999999', 'x-ratelimit-reset-after': '60', 'x-ratelimit-bucket': 'bench' },
  }
  const send = () => response
  for (let i = 0; i < n; i += 100) {
    const runs = []
    for (let j = 0; j < 100; j++) runs.push(limiter.run('POST', '/channels/100000000000000001/messages', send))
    await Promise.all(runs)
  }
  await limiter.close()
}

main().then(() => process.exit(0), (e) => { console.error(e); process.exit(1) })
