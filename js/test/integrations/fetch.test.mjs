// `ratelaneFetch` with the real SDKs that take a `fetch` (openai, @anthropic-ai/sdk, ky,
// @octokit/core), pinned in package.json, each against the local imitation of its API (the
// core's simulator behind node:http on 127.0.0.1, in the API's dialect) with the README's one
// line. For each: the library alone takes 429s (or GitHub's 403s) on a burst, so they are
// avoidable; with ratelane every request completes and the server refuses none. A request
// ratelane refuses arrives as the SDK's own rate-limit error. No timing is asserted.
//
// Runs on the package under test (RATELANE_PACKAGE: the napi `ratelane`, or `ratelane-wasm`).
import test from 'node:test'
import assert from 'node:assert/strict'
import OpenAI from 'openai'
import Anthropic from '@anthropic-ai/sdk'
import ky from 'ky'
import { Octokit } from '@octokit/core'
import { ratelane, startServer } from './support.mjs'

const { RateLimiter, ratelaneFetch, readLlmRequest, MaxWaitExceededError, InvalidArgumentError } = ratelane

/** A window of `limit` requests per `windowMs` on `routes` (fixed, opening at the first arrival). */
function api(profile, routes, limit, windowMs, extra = {}) {
  return {
    profile,
    dialect: profile,
    global: null,
    buckets: { api: { limit, window_ns: windowMs * 1e6, kind: 'fixed' } },
    routes: Object.fromEntries(routes.map((r) => [r, { bucket: 'api' }])),
    ...extra,
  }
}

/** Runs `count` calls of `call(i)` at once; the outcomes, in order. */
function burst(count, call) {
  return Promise.allSettled(Array.from({ length: count }, (_, i) => call(i)))
}

function refused(server) {
  return (server.stats.byStatus[429] || 0) + (server.stats.byStatus[403] || 0)
}

const N = 24

test('openai: alone it takes 429s on a burst; with fetch: ratelaneFetch(...) none, every request completes', async (t) => {
  for (const withRatelane of [false, true]) {
    const server = await startServer({ config: api('openai', ['POST /v1/chat/completions'], 8, 400) })
    t.after(() => server.close())
    const fetch = withRatelane ? ratelaneFetch({ profile: 'openai' }) : undefined
    const client = new OpenAI({ apiKey: 'test', baseURL: `${server.url}/v1`, ...(fetch ? { fetch } : {}) })
    const outcomes = await burst(N, (i) => client.chat.completions.create({
      model: 'gpt-4o-mini', messages: [{ role: 'user', content: `hello ${i}` }], max_tokens: 16,
    }))
    if (fetch) await fetch.limiter.close()
    if (withRatelane) {
      assert.deepEqual(outcomes.filter((o) => o.status === 'rejected').map((o) => String(o.reason)), [])
      assert.equal(refused(server), 0, 'no 429 with ratelane')
    } else {
      assert.ok(refused(server) > 0, `the SDK alone takes 429s (${JSON.stringify(server.stats.byStatus)})`)
    }
  }
})

test('openai: a request ratelane refuses (maxWait) is the SDK\'s own RateLimitError, not retried', async (t) => {
  const server = await startServer({ config: api('openai', ['POST /v1/chat/completions'], 2, 60_000) })
  t.after(() => server.close())
  const fetch = ratelaneFetch({ profile: 'openai', maxWait: 1000 })
  const client = new OpenAI({ apiKey: 'test', baseURL: `${server.url}/v1`, fetch })
  const create = () => client.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] })
  await create() // the answer says 1 left of 2 for a minute
  await create()
  await assert.rejects(create(), (error) => {
    assert.ok(error instanceof OpenAI.RateLimitError, `${error}`)
    assert.equal(error.status, 429)
    assert.equal(error.headers.get('x-ratelane-code'), 'max_wait_exceeded')
    assert.ok(Number(error.headers.get('retry-after')) > 1)
    return true
  })
  assert.equal(server.stats.arrivals, 2, 'the refused request never reached the server, nor did a retry')
  // With refusal: 'throw', ratelane's own error (OpenAI wraps a fetch rejection; its cause is ours).
  const throwing = new OpenAI({ apiKey: 'test', baseURL: `${server.url}/v1`, maxRetries: 0,
    fetch: ratelaneFetch(fetch.limiter, { refusal: 'throw' }) })
  await assert.rejects(throwing.chat.completions.create({ model: 'm', messages: [] }),
    (error) => error.cause instanceof MaxWaitExceededError)
  await fetch.limiter.close()
})

test('openai: each request\'s tokens, estimated from its body, keep a token budget: alone 429s, with ratelane none', async (t) => {
  // 6,000 tokens per 500 ms, each request charged what the core estimates from its body (its
  // text / 4 + max_tokens: readLlmRequest); requests are not limited.
  const config = api('openai', ['POST /v1/chat/completions'], 1000, 500, { tokens: { cost: 1000, limit: 6, window_ns: 500e6, kind: 'fixed' } })
  const costOf = (body) => (body ? readLlmRequest(JSON.stringify(body)).tokens : 1)
  for (const withRatelane of [false, true]) {
    const server = await startServer({ config, costOf })
    t.after(() => server.close())
    const fetch = withRatelane ? ratelaneFetch({ profile: 'openai' }) : undefined
    const client = new OpenAI({ apiKey: 'test', baseURL: `${server.url}/v1`, ...(fetch ? { fetch } : {}) })
    // 20 requests of about 1,000 tokens: over three windows' budget.
    const outcomes = await burst(20, (i) => client.chat.completions.create({
      model: 'gpt-4o-mini', max_tokens: 990, messages: [{ role: 'user', content: `question ${i}` }],
    }))
    if (fetch) await fetch.limiter.close()
    if (withRatelane) {
      assert.deepEqual(outcomes.filter((o) => o.status === 'rejected').map((o) => String(o.reason)), [])
      assert.equal(refused(server), 0, `no 429 with the estimates: ${JSON.stringify(server.stats.byStatus)}`)
    } else {
      assert.ok(refused(server) > 0, `the SDK alone exceeds the token budget (${JSON.stringify(server.stats.byStatus)})`)
    }
  }
})

test('ratelaneFetch: the core\'s estimate and model from the body; estimate() overrides it, false turns it off', async (t) => {
  const server = await startServer({ config: api('openai', ['POST /v1/chat/completions'], 100, 1000) })
  t.after(() => server.close())
  const body = { model: 'gpt-4o-mini', max_tokens: 50, messages: [{ role: 'user', content: 'hello there' }] }
  const expected = readLlmRequest(JSON.stringify(body))
  assert.equal(expected.model, 'gpt-4o-mini')
  const seen = []
  const limiter = new RateLimiter({ profile: 'openai' })
  const run = limiter.run.bind(limiter)
  limiter.run = (method, path, send, options) => { seen.push(options); return run(method, path, send, options) }
  const variants = [undefined, ({ body: text }) => ({ tokens: text.length, model: 'mine' }), false]
  for (const estimate of variants) {
    const client = new OpenAI({ apiKey: 'test', baseURL: `${server.url}/v1`, fetch: ratelaneFetch(limiter, { estimate }) })
    await client.chat.completions.create(body)
  }
  assert.deepEqual(seen[0].costs, { tokens: expected.tokens })
  assert.equal(seen[0].model, 'gpt-4o-mini')
  assert.equal(seen[1].model, 'mine')
  assert.ok(seen[1].costs.tokens > 0 && seen[1].costs.tokens !== expected.tokens)
  assert.equal(seen[2].costs, undefined)
  assert.equal(seen[2].model, undefined)
  // A body that is no LLM request (GitHub's, Discord's): no estimate, no model.
  const plain = ratelaneFetch(limiter)
  await plain(`${server.url}/v1/chat/completions`, { method: 'POST', body: JSON.stringify({ content: 'hi' }) })
  assert.equal(seen[3].costs, undefined)
  await limiter.close()
})

test('anthropic: alone it takes 429s on a burst; with fetch: ratelaneFetch(...) none, every request completes', async (t) => {
  for (const withRatelane of [false, true]) {
    const server = await startServer({ config: api('anthropic', ['POST /v1/messages'], 8, 400) })
    t.after(() => server.close())
    const fetch = withRatelane ? ratelaneFetch({ profile: 'anthropic' }) : undefined
    const client = new Anthropic({ apiKey: 'test', baseURL: server.url, ...(fetch ? { fetch } : {}) })
    const outcomes = await burst(N, (i) => client.messages.create({
      model: 'claude-sonnet-4-5', max_tokens: 16, messages: [{ role: 'user', content: `hello ${i}` }],
    }))
    if (fetch) await fetch.limiter.close()
    if (withRatelane) {
      assert.deepEqual(outcomes.filter((o) => o.status === 'rejected').map((o) => String(o.reason)), [])
      assert.equal(refused(server), 0)
    } else {
      assert.ok(refused(server) > 0, `the SDK alone takes 429s (${JSON.stringify(server.stats.byStatus)})`)
    }
  }
})

test('anthropic: a refusal is the SDK\'s own RateLimitError', async (t) => {
  const server = await startServer({ config: api('anthropic', ['POST /v1/messages'], 1, 60_000) })
  t.after(() => server.close())
  const fetch = ratelaneFetch({ profile: 'anthropic', maxWait: 500 })
  const client = new Anthropic({ apiKey: 'test', baseURL: server.url, fetch })
  const create = () => client.messages.create({ model: 'm', max_tokens: 1, messages: [{ role: 'user', content: 'hi' }] })
  await create()
  await assert.rejects(create(), (error) => error instanceof Anthropic.RateLimitError &&
    error.headers.get('x-ratelane-code') === 'max_wait_exceeded')
  assert.equal(server.stats.arrivals, 1)
  await fetch.limiter.close()
})

test('ky: alone it takes 429s on a burst; with ky.create({ fetch: ratelaneFetch(...) }) none', async (t) => {
  for (const withRatelane of [false, true]) {
    const server = await startServer({ config: api('ietf', ['GET /items/:id'], 6, 300) })
    t.after(() => server.close())
    const fetch = withRatelane ? ratelaneFetch({ profile: 'ietf' }) : undefined
    const client = ky.create({ prefixUrl: server.url, ...(fetch ? { fetch } : {}) })
    const outcomes = await burst(N, (i) => client.get(`items/${i}`).json())
    if (fetch) await fetch.limiter.close()
    if (withRatelane) {
      assert.deepEqual(outcomes.filter((o) => o.status === 'rejected').map((o) => String(o.reason)), [])
      assert.equal(refused(server), 0)
    } else {
      assert.ok(refused(server) > 0, `ky alone takes 429s (${JSON.stringify(server.stats.byStatus)})`)
    }
  }
})

test('octokit: alone a burst meets the limit (RequestError 403); with request: { fetch: ratelaneFetch(...) } none', async (t) => {
  const repo = 'octo-org/hello-world'
  for (const withRatelane of [false, true]) {
    const server = await startServer({ config: api('github', [`GET /repos/${repo}/issues/:id`], 6, 400) })
    t.after(() => server.close())
    const fetch = withRatelane ? ratelaneFetch({ profile: 'github' }) : undefined
    const octokit = new Octokit({ baseUrl: server.url, ...(fetch ? { request: { fetch } } : {}) })
    const outcomes = await burst(N, (i) => octokit.request('GET /repos/{owner}/{repo}/issues/{number}',
      { owner: 'octo-org', repo: 'hello-world', number: i + 1 }))
    if (fetch) await fetch.limiter.close()
    const failed = outcomes.filter((o) => o.status === 'rejected')
    if (withRatelane) {
      assert.deepEqual(failed.map((o) => String(o.reason)), [])
      assert.equal(refused(server), 0)
    } else {
      assert.ok(failed.length > 0 && failed.every((o) => o.reason.status === 403), 'Octokit alone fails on the 403s')
    }
  }
})

test('ratelaneFetch: options are checked like run\'s; a Request input is re-sent from a clone', async (t) => {
  assert.throws(() => ratelaneFetch({}, { refusal: 'maybe' }), (e) => e instanceof InvalidArgumentError &&
    /refusal must be one of 'response', 'throw', got a string \("maybe"\)/.test(e.message))
  assert.throws(() => ratelaneFetch({}, { fetsh: globalThis.fetch }), (e) => e instanceof InvalidArgumentError &&
    /unknown option "fetsh"; expected one of: fetch, refusal, estimate, run/.test(e.message))
  assert.throws(() => ratelaneFetch('openai'), InvalidArgumentError)
  // A 429 the core retries: the Request's body is sent again, whole.
  const server = await startServer({ config: api('ietf', ['POST /items'], 1, 300) })
  t.after(() => server.close())
  const limiter = new RateLimiter({ profile: 'ietf' })
  const fetch = ratelaneFetch(limiter)
  assert.equal(fetch.limiter, limiter)
  const results = await Promise.all([1, 2, 3].map((i) =>
    fetch(new Request(`${server.url}/items`, { method: 'POST', body: JSON.stringify({ i }), headers: { 'content-type': 'application/json' } }))))
  assert.deepEqual(results.map((r) => r.status), [200, 200, 200])
  await limiter.close()
})
