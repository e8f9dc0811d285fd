#!/usr/bin/env node
// LLM budgets over real HTTP: the Node package (`ratelane`, napi) beside an oracle, the twin of
// bench/tokens/run_python.py (the same scenarios, workloads and figures; README.md here). A
// timed measurement, not part of the test command.
//
// The imitation is bindings-node/test/discord-server.cjs over the core's simulator (SimServer)
// on 127.0.0.1, a fresh one for every client of every scenario: dialect `openai`, the requests
// and the tokens buckets refilling continuously (`kind: 'refill'`, in full every 6 s), each
// request's real cost in its JSON body (`tokens`), charged on arrival and reported back as
// `usage.total_tokens`, ~20 ms before each answer. In the same run, per scenario and estimate
// mode:
//   oracle: knows the limits and every real cost; sends the head of the line as soon as its own
//     model of both buckets covers it (greedy, never waiting for answers but the first, from
//     which it refills), with `fetch`;
//   ratelane: one RateLimiter({ profile: 'openai' }), each request with `costs: { tokens: estimate }`.
//
//   node bench/tokens/run_node.js [--scenario burst|stream|mix|all] [--estimates exact|30|both]
//                                 [--seed 1] [--runs 1]
'use strict'
const os = require('node:os')
const path = require('node:path')

const root = path.join(__dirname, '..', '..')
const { RateLimiter } = require(path.join(root, 'bindings-node'))
const { startDiscordServer } = require(path.join(root, 'bindings-node', 'test', 'discord-server.cjs'))

const CHAT = '/v1/chat/completions'
const PERIOD_NS = 6e9
const LIMITS = { burst: [200, 100_000], stream: [200, 100_000], mix: [100, 100_000] }

function serverConfig(scenario) {
  const [rpm, tpm] = LIMITS[scenario]
  return {
    profile: 'openai',
    dialect: 'openai',
    global: null,
    buckets: { chat: { limit: rpm, window_ns: PERIOD_NS, kind: 'refill' } },
    routes: { [`POST ${CHAT}`]: { bucket: 'chat' } },
    tokens: { cost: 1000, limit: tpm / 1000, window_ns: PERIOD_NS, kind: 'refill' },
  }
}

function parseArgs(argv) {
  const options = { scenario: 'all', estimates: 'both', seed: 1, runs: 1 }
  for (let i = 0; i < argv.length; i++) {
    const name = argv[i].replace(/^--/, '')
    if (!(name in options) || i + 1 >= argv.length) {
      throw new Error(`usage: run_node.js [--scenario S] [--estimates exact|30|both] [--seed N] [--runs R] (got ${argv[i]})`)
    }
    const value = argv[++i]
    if (name === 'scenario' || name === 'estimates') options[name] = value
    else {
      options[name] = Number(value)
      if (!Number.isSafeInteger(options[name]) || options[name] < (name === 'seed' ? 0 : 1)) throw new Error(`--${name} must be a whole number`)
    }
  }
  if (!['burst', 'stream', 'mix', 'all'].includes(options.scenario)) throw new Error('--scenario: burst, stream, mix or all')
  if (!['exact', '30', 'both'].includes(options.estimates)) throw new Error('--estimates: exact, 30 or both')
  return options
}

/** mulberry32: a small seeded PRNG, uniform in [0, 1) (run_python.py draws the same). */
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

/** The workload of run_python.py's `workload`: { at (s), actual, estimate } per request. */
function workload(scenario, seed, error) {
  const draw = prng(seed)
  const count = { burst: 300, stream: 450, mix: 400 }[scenario]
  const jobs = []
  for (let i = 0; i < count; i++) {
    let actual
    if (scenario === 'mix') {
      const huge = draw() < 0.04
      actual = huge ? 20_000 + Math.floor(draw() * 20_001) : 50 + Math.floor(draw() * 101)
    } else {
      actual = 200 + Math.floor(draw() * 1801)
    }
    const factor = 1 - error + 2 * error * draw()
    const estimate = Math.max(1, Math.floor(actual * factor + 0.5))
    jobs.push({ at: scenario === 'stream' ? i / 22.5 : 0, actual, estimate })
  }
  return jobs
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

// The oracle sends a request once each bucket covers it plus what refills in this long: the
// server counts a request when it arrives, and a bucket that was full meanwhile did not keep
// what refilled while the request was on its way (run_python.py, ORACLE_TRANSIT_S).
const ORACLE_TRANSIT_S = 0.05

/** The oracle's model of one bucket: `cap` refilling in PERIOD_NS, full at the start. */
class Bucket {
  constructor(cap) {
    this.cap = cap
    this.level = cap
    this.at = 0
  }

  refill(now) {
    this.level = Math.min(this.cap, this.level + this.cap * (now - this.at) * 1e9 / PERIOD_NS)
    this.at = now
  }

  /** Seconds until it covers `cost` and ORACLE_TRANSIT_S of refill (0: now). */
  wait(cost) {
    const margin = Math.max(0, Math.min(this.cap - cost, this.cap * ORACLE_TRANSIT_S * 1e9 / PERIOD_NS))
    return Math.max(0, (cost + margin - this.level) * PERIOD_NS / 1e9 / this.cap)
  }
}

function post(url, actual, signal) {
  return fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'gpt-sim', tokens: actual }),
    signal,
  })
}

async function oracle(url, scenario, jobs) {
  const [rpm, tpm] = LIMITS[scenario]
  const requests = new Bucket(rpm)
  const tokens = new Bucket(tpm)
  const start = performance.now()
  const elapsed = () => (performance.now() - start) / 1e3
  const outcomes = {}
  const sends = []
  // Its buckets refill from its first answer on: the server's, full until the first request
  // arrives, kept nothing of what refilled before (run_python.py, `oracle`).
  let answered = null
  for (const { at, actual } of jobs) {
    for (;;) {
      const now = elapsed()
      if (answered === null || !answered.done) requests.at = tokens.at = now
      requests.refill(now)
      tokens.refill(now)
      const wait = Math.max(at - now, requests.wait(1), tokens.wait(actual))
      if (wait <= 0) break
      if (answered !== null && !answered.done) {
        await answered.promise
        requests.at = tokens.at = elapsed()
      } else {
        await sleep(wait * 1e3)
      }
    }
    requests.level -= 1
    tokens.level -= actual
    const sent = post(url, actual).then(async (response) => {
      await response.arrayBuffer()
      outcomes[response.status] = (outcomes[response.status] || 0) + 1
    })
    if (answered === null) {
      answered = { done: false, promise: null }
      answered.promise = sent.finally(() => { answered.done = true })
      sends.push(answered.promise)
    } else {
      sends.push(sent)
    }
  }
  await Promise.all(sends)
  return outcomes
}

async function driver(url, jobs) {
  const limiter = new RateLimiter({ profile: 'openai' })
  const start = performance.now()
  const outcomes = {}
  try {
    await Promise.all(jobs.map(async ({ at, actual, estimate }) => {
      const delay = start + at * 1e3 - performance.now()
      if (delay > 0) await sleep(delay)
      try {
        const response = await limiter.run('POST', CHAT, ({ signal }) => post(url, actual, signal), { costs: { tokens: estimate } })
        await response.arrayBuffer()
        outcomes[response.status] = (outcomes[response.status] || 0) + 1
      } catch (error) {
        const code = error && error.code ? error.code : String(error)
        outcomes[code] = (outcomes[code] || 0) + 1
      }
    }))
  } finally {
    await limiter.close()
  }
  return outcomes
}

/** From the first arrival to the last admitted one, on the server's clock: { span s, tokens, admitted }. */
function spanOf(arrivals) {
  const admitted = arrivals.filter((a) => a.status === 200)
  if (admitted.length === 0) return { span: 0, tokens: 0, admitted: 0 }
  const first = Math.min(...arrivals.map((a) => a.atNs))
  const last = Math.max(...admitted.map((a) => a.atNs))
  return { span: (last - first) / 1e9, tokens: admitted.reduce((s, a) => s + a.tokens, 0), admitted: admitted.length }
}

async function oneClient(client, scenario, jobs) {
  const server = await startDiscordServer({
    config: serverConfig(scenario),
    latencyMs: 20,
    lifetimeMs: 30 * 60_000,
    costOf: (body) => (body && Number.isInteger(body.tokens) ? body.tokens : undefined),
  })
  let outcomes
  try {
    outcomes = client === 'oracle' ? await oracle(server.url + CHAT, scenario, jobs) : await driver(server.url + CHAT, jobs)
  } finally {
    await server.close()
  }
  const failed = Object.entries(outcomes).filter(([k]) => k !== '200').reduce((s, [, v]) => s + v, 0)
  return {
    client,
    completed: outcomes[200] || 0,
    failed,
    outcomes,
    count429: server.stats.byStatus[429] || 0,
    ...spanOf(server.stats.tokens),
  }
}

const load = () => os.loadavg().map((x) => x.toFixed(2)).join(' ')

async function main() {
  const options = parseArgs(process.argv.slice(2))
  const scenarios = options.scenario === 'all' ? ['burst', 'stream', 'mix'] : [options.scenario]
  const errors = { exact: [0], 30: [0.3], both: [0, 0.3] }[options.estimates]
  console.log(`ratelane Node (napi, ${process.version}), fetch; buckets refilling in 6 s, ~20 ms per answer; load average ${load()}`)
  console.log('')
  console.log('| scenario | estimates | seed | client | completed | failed | 429s | tokens admitted | span (s) | tokens/s | of the oracle\'s | load |')
  console.log('|---|---|---|---|---|---|---|---|---|---|---|---|')
  for (const scenario of scenarios) {
    for (const error of errors) {
      for (let i = 0; i < options.runs; i++) {
        const seed = options.seed + i
        const jobs = workload(scenario, seed, error)
        const results = []
        for (const client of ['oracle', 'node']) results.push(await oneClient(client, scenario, jobs))
        const best = results[0].span
        for (const r of results) {
          const rate = r.span ? r.tokens / r.span : 0
          const share = r.span ? best / r.span : NaN
          const failed = r.failed === 0 ? '0' : `${r.failed} ${JSON.stringify(r.outcomes)}`
          const label = error === 0 ? 'exact' : `±${Math.round(error * 100)} %`
          console.log(`| ${scenario} | ${label} | ${seed} | ${r.client} | ${r.completed} | ${failed} | ${r.count429} | ${r.tokens} | ${r.span.toFixed(2)} | ${rate.toFixed(0)} | ${share.toFixed(3)} | ${load()} |`)
        }
      }
    }
  }
}

main().catch((error) => {
  console.error(error)
  process.exit(1)
})
