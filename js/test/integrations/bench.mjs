// Each library alone beside the library with ratelane's one line, in the same run, against the
// same local imitation of its API (the core's simulator behind node:http on 127.0.0.1, in the
// API's dialect): completions, failures, the server's refusals by scope, time. A timed
// measurement (issue 47, BENCHMARKS.md), not part of the test command.
//
//   bash js/test/integrations/setup.sh bindings-node      # the libraries and the package, once
//   node js/test/integrations/bench.mjs [--runs 2] [--only openai,ky,...]
//
// Prints one markdown table. Per library and variant, one burst of requests submitted at once:
// - openai, anthropic: 60 completions asking for 500 tokens each; the imitation's requests
//   window 40 per 1 s (fixed, from the first arrival) and a token budget of 12,000 per 1 s (the
//   one that binds), each request charged its `max_tokens` plus a quarter of its text (what the
//   imitation counts as the prompt; ratelane estimates it from the body with the core's
//   `readLlmRequest`); the SDK's defaults (2 retries) in both variants;
// - ky: 60 GETs of an IETF `RateLimit` API, 20 per 1 s; ky's defaults (2 retries of a 429);
// - octokit (fetch): 60 GETs of the `core` budget, 20 per 1 s, Octokit alone, then with
//   `request: { fetch: ratelaneFetch(...) }`;
// - octokit (plugin): the same burst with @octokit/plugin-throttling (its hooks retry up to 3
//   times), then with `Octokit.plugin(ratelaneOctokit)` (the same hooks);
// - undici: 60 `request()`s of Discord messages over 6 channels (5 per 1 s each) and a global
//   limit of 20 per 1 s, through a plain Agent, then `agent.compose(interceptor(...))`;
// - fetch (Node's): the same burst with the global fetch, then after `install(...)`.
// Columns: completed (the call resolved with a 2xx), failed (rejected or a non-2xx, by kind),
// refused by the server (429s, or GitHub's 403s, by scope), time from submission to the last
// outcome, and the load average when the row was measured.
import os from 'node:os'
import OpenAI from 'openai'
import Anthropic from '@anthropic-ai/sdk'
import ky from 'ky'
import { Octokit } from '@octokit/core'
import { throttling } from '@octokit/plugin-throttling'
import { Agent, request } from 'undici'
import { ratelane, startServer } from './support.mjs'
import { interceptor, install } from 'ratelane/undici'
import { ratelaneOctokit } from 'ratelane/octokit'

const { ratelaneFetch } = ratelane

const args = process.argv.slice(2)
const option = (name, fallback) => {
  const i = args.indexOf(`--${name}`)
  return i >= 0 && i + 1 < args.length ? args[i + 1] : fallback
}
const runs = Number(option('runs', '1'))
const only = option('only', null)

const N = 60
const WINDOW_NS = 1e9

/** An API of `limit` requests per second on `routes`, in `profile`'s dialect. */
function api(profile, routes, limit, extra = {}) {
  return {
    profile,
    dialect: profile,
    global: null,
    buckets: { api: { limit, window_ns: WINDOW_NS, kind: 'fixed' } },
    routes: Object.fromEntries(routes.map((r) => [r, { bucket: 'api' }])),
    ...extra,
  }
}

/** What the LLM imitations charge a request: its max_tokens and a quarter of its text. */
function llmCost(body) {
  if (!body || typeof body !== 'object') return 1
  const text = JSON.stringify(body.messages ?? body.input ?? '')
  return (body.max_tokens ?? 0) + Math.ceil(text.length / 4)
}
const TOKENS = { cost: 1000, limit: 12, window_ns: WINDOW_NS, kind: 'fixed' } // 12,000 per second

function prompt(i) {
  return [{ role: 'user', content: `Write a haiku about the number ${i}.` }]
}

const REPO = 'octo-org/hello-world'
const DISCORD = {
  global: { limit: 20, window_ns: WINDOW_NS },
  buckets: { msg: { limit: 5, window_ns: WINDOW_NS } },
  routes: { 'POST /channels/:id/messages': { bucket: 'msg' } },
}
const channel = (i) => `${100000000000000000n + BigInt(i % 6)}`

/** The libraries: each a name, the imitation's config, and the two variants' bursts. */
const CASES = [
  {
    name: 'openai',
    config: api('openai', ['POST /v1/chat/completions'], 40, { tokens: TOKENS }),
    costOf: llmCost,
    alone: (server) => ({ client: new OpenAI({ apiKey: 'bench', baseURL: `${server.url}/v1` }) }),
    with: (server) => {
      const fetch = ratelaneFetch({ profile: 'openai' })
      return { client: new OpenAI({ apiKey: 'bench', baseURL: `${server.url}/v1`, fetch }), limiter: fetch.limiter }
    },
    call: ({ client }, i) => client.chat.completions.create({ model: 'gpt-4o-mini', max_tokens: 500, messages: prompt(i) }),
    limiterOf: (c) => c.limiter,
  },
  {
    name: 'anthropic',
    config: api('anthropic', ['POST /v1/messages'], 40, { tokens: TOKENS }),
    costOf: llmCost,
    alone: (server) => ({ client: new Anthropic({ apiKey: 'bench', baseURL: server.url }) }),
    with: (server) => {
      const fetch = ratelaneFetch({ profile: 'anthropic' })
      return { client: new Anthropic({ apiKey: 'bench', baseURL: server.url, fetch }), limiter: fetch.limiter }
    },
    call: ({ client }, i) => client.messages.create({ model: 'claude-sonnet-4-5', max_tokens: 500, messages: prompt(i) }),
    limiterOf: (c) => c.limiter,
  },
  {
    name: 'ky',
    config: api('ietf', ['GET /items/:id'], 20),
    alone: (server) => ({ client: ky.create({ prefixUrl: server.url }) }),
    with: (server) => {
      const fetch = ratelaneFetch({ profile: 'ietf' })
      return { client: ky.create({ prefixUrl: server.url, fetch }), limiter: fetch.limiter }
    },
    call: ({ client }, i) => client.get(`items/${i}`).json(),
    limiterOf: (c) => c.limiter,
  },
  {
    name: 'octokit (fetch)',
    config: api('github', [`GET /repos/${REPO}/issues/:id`], 20),
    alone: (server) => ({ client: new Octokit({ baseUrl: server.url }) }),
    with: (server) => {
      const fetch = ratelaneFetch({ profile: 'github' })
      return { client: new Octokit({ baseUrl: server.url, request: { fetch } }), limiter: fetch.limiter }
    },
    call: ({ client }, i) => client.request('GET /repos/{owner}/{repo}/issues/{issue_number}', { owner: 'octo-org', repo: 'hello-world', issue_number: i + 1 }),
    limiterOf: (c) => c.limiter,
  },
  {
    name: 'octokit (plugin)',
    label: ['plugin-throttling', 'ratelaneOctokit'],
    config: api('github', [`GET /repos/${REPO}/issues/:id`], 20),
    alone: (server) => ({ client: new (Octokit.plugin(throttling))({ baseUrl: server.url, throttle: hooks() }) }),
    with: (server) => {
      const client = new (Octokit.plugin(ratelaneOctokit))({ baseUrl: server.url, throttle: hooks() })
      return { client, limiter: client.ratelane.limiter }
    },
    call: ({ client }, i) => client.request('GET /repos/{owner}/{repo}/issues/{issue_number}', { owner: 'octo-org', repo: 'hello-world', issue_number: i + 1 }),
    limiterOf: (c) => c.limiter,
  },
  {
    name: 'undici',
    config: DISCORD,
    alone: () => ({ agent: new Agent() }),
    with: (server) => {
      const intercept = interceptor({ globalLimit: 20, globalWindow: 1000 }, { origins: server.url })
      return { agent: new Agent().compose(intercept), limiter: intercept.limiter }
    },
    call: async ({ agent }, i, server) => {
      const res = await request(`${server.url}/api/v10/channels/${channel(i)}/messages`, {
        method: 'POST', dispatcher: agent, body: JSON.stringify({ content: `m${i}` }), headers: { 'content-type': 'application/json' },
      })
      await res.body.dump()
      if (res.statusCode >= 300) throw new Error(`HTTP ${res.statusCode}`)
    },
    limiterOf: (c) => c.limiter,
    close: (c) => c.agent.close(),
  },
  {
    name: 'fetch (Node\'s)',
    config: DISCORD,
    alone: () => ({}),
    with: (server) => ({ uninstall: install({ globalLimit: 20, globalWindow: 1000 }, { origins: server.url }) }),
    call: async (_, i, server) => {
      const res = await fetch(`${server.url}/api/v10/channels/${channel(i)}/messages`, {
        method: 'POST', body: JSON.stringify({ content: `m${i}` }), headers: { 'content-type': 'application/json' },
      })
      await res.arrayBuffer()
      if (res.status >= 300) throw new Error(`HTTP ${res.status}`)
    },
    limiterOf: (c) => c.uninstall?.limiter,
    close: (c) => c.uninstall?.(),
  },
]

function hooks() {
  return {
    onRateLimit: (after, options, octokit, retryCount) => retryCount < 3,
    onSecondaryRateLimit: (after, options, octokit, retryCount) => retryCount < 3,
  }
}

function kind(error) {
  return error?.constructor?.name === 'Error' ? error.message : (error?.name ?? String(error))
}

async function measure(c, variant) {
  const server = await startServer({ config: c.config, costOf: c.costOf, lifetimeMs: 600_000 })
  const client = c[variant](server)
  const t0 = performance.now()
  let last = t0
  const outcomes = await Promise.allSettled(Array.from({ length: N }, (_, i) =>
    Promise.resolve().then(() => c.call(client, i, server)).finally(() => { last = performance.now() })))
  const time = (last - t0) / 1000
  const limiter = c.limiterOf(client)
  if (c.close) await c.close(client)
  if (limiter) await limiter.close()
  await server.close()
  const failed = {}
  for (const o of outcomes) if (o.status === 'rejected') failed[kind(o.reason)] = (failed[kind(o.reason)] ?? 0) + 1
  return {
    completed: outcomes.filter((o) => o.status === 'fulfilled').length,
    failed,
    refused: { ...server.stats.byScope },
    arrivals: server.stats.arrivals,
    time,
    load: os.loadavg()[0],
  }
}

const show = (counts) => {
  const entries = Object.entries(counts)
  return entries.length === 0 ? '0' : entries.map(([k, v]) => `${k}: ${v}`).join(', ')
}

console.log(`| library | variant | requests | completed | failed | refused by the server | sent (arrivals) | time (s) | load |`)
console.log('|---|---|---|---|---|---|---|---|---|')
for (let run = 0; run < runs; run++) {
  for (const c of CASES) {
    if (only && !only.split(',').includes(c.name)) continue
    for (const variant of ['alone', 'with']) {
      const r = await measure(c, variant)
      const label = c.label ? c.label[variant === 'alone' ? 0 : 1] : (variant === 'alone' ? 'alone' : 'with ratelane')
      console.log(`| ${c.name} | ${label} | ${N} | ${r.completed} | ${show(r.failed)} | ${show(r.refused)} | ${r.arrivals} | ${r.time.toFixed(2)} | ${r.load.toFixed(2)} |`)
    }
  }
}
