// A BullMQ worker that posts through ratelane and, rather than hold a worker slot while the
// rate limit waits, moves the job to BullMQ's delayed set until the limiter's predicted send
// time.
//
//   npm install ./bindings-node                 # once, from the repository root
//   (cd examples/node/bullmq && npm install)    # bullmq, for this example only
//   node examples/node/bullmq/defer.js redis://127.0.0.1:6379/
//
// With `deferAfter: 300` a request whose predicted wait is longer than 300 ms rejects at once
// with ratelane's DeferredError; its `retryAtMs` (epoch ms, the wall clock BullMQ schedules by)
// is when the limiter expects it could go. The processor calls
// `job.moveToDelayed(err.retryAtMs, token)` and throws BullMQ's DelayedError, so the job comes
// back then without using up an attempt. The HTTP server is a local imitation of Discord
// (ratelane's model of its rate limits over HTTP on 127.0.0.1) allowing 1 message per second
// per channel; Redis is the one given (the test script starts a throwaway one). The queue's
// keys are removed at the end.
'use strict'
const path = require('node:path')
const { Queue, Worker, DelayedError } = require('bullmq')
const ratelane = require(path.join(__dirname, '..', '..', '..', 'bindings-node'))
const { startDiscordServer } = require(path.join(__dirname, '..', '..', '..', 'bindings-node', 'test', 'discord-server.cjs'))
const { RateLimiter, DeferredError } = ratelane

const JOBS = 4

async function main() {
  const url = new URL(process.argv[2] || process.env.RATELANE_REDIS_URL || 'redis://127.0.0.1:6379/')
  const connection = { host: url.hostname, port: Number(url.port || 6379), maxRetriesPerRequest: null }
  const server = await startDiscordServer({
    config: {
      buckets: { msg: { limit: 1, window_ns: 1e9 } },
      routes: { 'POST /channels/:id/messages': { bucket: 'msg' } },
    },
  })
  const api = `${server.url}/api/v10`
  const limiter = new RateLimiter({ deferAfter: 300 }) // the default; `run` may override it per request

  const name = `ratelane-defer-${process.pid}-${Date.now()}`
  const queue = new Queue(name, { connection })
  const deferrals = []
  const statuses = {}
  let done
  const finished = new Promise((resolve) => { done = resolve })
  let completed = 0

  const worker = new Worker(name, async (job, token) => {
    const channel = job.data.channel
    try {
      const res = await limiter.run('POST', `/channels/${channel}/messages`, ({ signal }) =>
        fetch(`${api}/channels/${channel}/messages`, {
          method: 'POST', signal, headers: { 'content-type': 'application/json' }, body: JSON.stringify({ content: job.data.text }),
        }))
      await res.arrayBuffer()
      statuses[res.status] = (statuses[res.status] || 0) + 1
      return res.status
    } catch (err) {
      if (err instanceof DeferredError) {
        // Not now: back to the delayed set until the limiter expects the request could go.
        deferrals.push({ job: job.data.text, retryAfter: err.retryAfter })
        await job.moveToDelayed(err.retryAtMs, token)
        throw new DelayedError()
      }
      throw err
    }
  }, { connection, concurrency: 2 })
  worker.on('completed', () => { if (++completed === JOBS) done() })
  worker.on('failed', (job, err) => { console.error(`job ${job && job.id} failed: ${err && err.stack}`); process.exitCode = 1; done() })

  const started = Date.now()
  for (let i = 0; i < JOBS; i++) {
    await queue.add('post', { channel: '100000000000000001', text: `job ${i + 1}` }, { removeOnComplete: true })
  }
  const timeout = setTimeout(() => { console.error('timed out'); process.exitCode = 1; done() }, 30_000)
  await finished
  clearTimeout(timeout)
  const elapsed = (Date.now() - started) / 1000

  await worker.close()
  await queue.obliterate({ force: true })
  await queue.close()
  await limiter.close()
  const count429 = server.count429()
  await server.close()

  for (const d of deferrals) console.log(`  ${d.job}: deferred, BullMQ runs it again in ${(d.retryAfter / 1000).toFixed(2)} s`)
  console.log(`statuses: ${JSON.stringify(statuses)}`)
  if (process.exitCode) return
  if (statuses[200] !== JOBS || Object.keys(statuses).length !== 1) throw new Error(`expected ${JOBS} x 200, got ${JSON.stringify(statuses)}`)
  if (deferrals.length < JOBS - 1) throw new Error(`expected at least ${JOBS - 1} deferrals, got ${deferrals.length}`)
  if (count429 !== 0) throw new Error(`the server sent ${count429} 429s`)
  console.log(`${JOBS} jobs sent in ${elapsed.toFixed(1)} s, ${deferrals.length} deferrals through moveToDelayed, 0 429s`)
}

main().catch((err) => { console.error(err); process.exit(1) })
