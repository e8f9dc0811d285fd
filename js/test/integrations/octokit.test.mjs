// `ratelane/octokit` with the real @octokit/core, beside @octokit/plugin-throttling (both
// pinned in package.json), against the local GitHub imitation (the core's simulator in its
// GitHub dialect: `x-ratelimit-*` and `x-ratelimit-resource`, a spent primary budget refused
// with 403 and `remaining: 0`, a secondary limit with 403, `retry-after` and its message).
//
// * a burst over the primary budget: plugin-throttling takes 403s (it learns the budget from
//   them, then waits for the reset); ratelane's plugin none, every request completes;
// * a secondary limit, hidden until met: the refusals go to `onSecondaryRateLimit` (the core
//   says which kind), the hook's true sends them again after the pause, false throws
//   Octokit's own RequestError;
// * two Octokits (two processes) of one token sharing the budget through Redis
//   (RATELANE_REDIS_URL): no 403.
// No timing is asserted.
import test from 'node:test'
import assert from 'node:assert/strict'
import { Octokit } from '@octokit/core'
import { throttling } from '@octokit/plugin-throttling'
import { ratelane, startServer } from './support.mjs'
import { ratelaneOctokit } from 'ratelane/octokit'

const { RateLimiter, InvalidArgumentError } = ratelane

const ROUTE = 'GET /repos/{owner}/{repo}/issues/{issue_number}'

/** A GitHub whose `core` budget is `limit` requests per `windowMs`, and a secondary limit. */
function github(limit, windowMs, secondary = null) {
  return {
    profile: 'github',
    dialect: 'github',
    buckets: { core: { limit, window_ns: windowMs * 1e6 } },
    // The simulator's GitHub routes keep names and turn numbers into :id.
    routes: {
      'GET /repos/octo-org/hello-world/issues/:id': { bucket: 'core' },
      'GET /repos/octo-org/gone': { bucket: 'core', status: 404 },
    },
    global: secondary,
  }
}

function issues(octokit, count) {
  return Promise.allSettled(Array.from({ length: count }, (_, i) =>
    octokit.request(ROUTE, { owner: 'octo-org', repo: 'hello-world', issue_number: i + 1 })))
}

const refused = (server) => server.stats.byStatus[403] || 0

test('a burst over the primary budget: plugin-throttling takes 403s, Octokit.plugin(ratelaneOctokit) none', async (t) => {
  const calls = { throttling: 0, ratelane: 0 }
  for (const [name, plugin] of [['throttling', throttling], ['ratelane', ratelaneOctokit]]) {
    const server = await startServer({ config: github(8, 500) })
    t.after(() => server.close())
    const MyOctokit = Octokit.plugin(plugin)
    const octokit = new MyOctokit({
      baseUrl: server.url,
      throttle: {
        onRateLimit: () => { calls[name] += 1; return true },
        onSecondaryRateLimit: () => { calls[name] += 1; return true },
      },
    })
    const outcomes = await issues(octokit, 20)
    assert.deepEqual(outcomes.filter((o) => o.status === 'rejected').map((o) => String(o.reason)), [], name)
    if (name === 'throttling') {
      assert.ok(refused(server) > 0 && calls.throttling > 0, `plugin-throttling meets the budget: ${refused(server)} 403s`)
    } else {
      assert.equal(refused(server), 0, 'no 403 with ratelane')
      assert.equal(calls.ratelane, 0, 'no hook called: nothing was refused')
      await octokit.ratelane.limiter.close()
    }
  }
})

test('a secondary limit: onSecondaryRateLimit decides; true sends it again after the pause, false throws RequestError', async (t) => {
  for (const retry of [true, false]) {
    const server = await startServer({ config: github(1000, 60_000, { limit: 6, window_ns: 500e6 }) })
    t.after(() => server.close())
    const seen = []
    const MyOctokit = Octokit.plugin(ratelaneOctokit)
    const octokit = new MyOctokit({
      baseUrl: server.url,
      throttle: {
        onRateLimit: () => { seen.push('primary'); return retry },
        onSecondaryRateLimit: (retryAfter, options, o, retryCount) => {
          seen.push('secondary')
          assert.ok(retryAfter >= 1 && options.method === 'GET' && o === octokit && retryCount >= 0)
          return retry
        },
      },
    })
    const outcomes = await issues(octokit, 12)
    assert.ok(seen.length > 0 && seen.every((s) => s === 'secondary'), `the core called them secondary: ${seen}`)
    const failed = outcomes.filter((o) => o.status === 'rejected')
    if (retry) {
      assert.deepEqual(failed.map((o) => String(o.reason)), [])
    } else {
      assert.ok(failed.length > 0)
      for (const f of failed) {
        assert.equal(f.reason.name, 'HttpError', `Octokit's RequestError: ${f.reason}`)
        assert.equal(f.reason.status, 403)
      }
    }
    await octokit.ratelane.limiter.close()
  }
})

test('ratelaneOctokit: a 404 is Octokit\'s RequestError as without it; options are checked; enabled: false', async (t) => {
  const server = await startServer({ config: github(10, 1000) })
  t.after(() => server.close())
  const MyOctokit = Octokit.plugin(ratelaneOctokit)
  const octokit = new MyOctokit({ baseUrl: server.url })
  await assert.rejects(octokit.request('GET /repos/{owner}/{repo}', { owner: 'octo-org', repo: 'gone' }), (e) => e.name === 'HttpError' && e.status === 404)
  await octokit.ratelane.limiter.close()
  assert.throws(() => new MyOctokit({ throttle: { onRateLimt: () => true } }),
    (e) => e instanceof InvalidArgumentError && /unknown option "onRateLimt"; expected one of: onRateLimit, onSecondaryRateLimit, enabled/.test(e.message))
  assert.throws(() => new MyOctokit({ ratelane: new RateLimiter() }), /profile must be 'github'/)
  assert.throws(() => new MyOctokit({ ratelane: new RateLimiter({ profile: 'github' }) }), /must not retry/)
  assert.equal(new MyOctokit({ throttle: { enabled: false } }).ratelane, undefined)
})

const redisUrl = process.env.RATELANE_REDIS_URL
test('two Octokits of one token share the primary budget through Redis: no 403', {
  skip: !redisUrl && process.env.RATELANE_REDIS_REQUIRED !== '1' ? 'RATELANE_REDIS_URL is not set' : false,
}, async (t) => {
  assert.ok(redisUrl, 'RATELANE_REDIS_REQUIRED=1 but RATELANE_REDIS_URL is not set')
  const { RedisStore } = await import('ratelane/redis')
  const server = await startServer({ config: github(8, 500) })
  t.after(() => server.close())
  const prefix = `{ratelane:octokit-test:${process.pid}:${Date.now()}}:`
  const MyOctokit = Octokit.plugin(ratelaneOctokit)
  const octokits = [0, 1].map(() => new MyOctokit({ baseUrl: server.url, ratelane: { shared: new RedisStore(redisUrl, { prefix }) } }))
  const outcomes = (await Promise.all(octokits.map((o) => issues(o, 12)))).flat()
  assert.deepEqual(outcomes.filter((o) => o.status === 'rejected').map((o) => String(o.reason)), [])
  assert.equal(refused(server), 0, `no 403: ${JSON.stringify(server.stats.byStatus)}`)
  await Promise.all(octokits.map((o) => o.ratelane.limiter.close()))
})
