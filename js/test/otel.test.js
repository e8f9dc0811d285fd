// The driver's OpenTelemetry instruments (`instrument`, `Metrics`), read back through
// @opentelemetry/sdk-metrics with an in-memory exporter, on the core under test
// (RATELANE_CORE). Assertions are on counts and on values the core decided, never on how long
// anything took. The SDK is a development package of bindings-node (scripts/tests.d/20-node.sh
// installs it); without it these tests are skipped, or fail when RATELANE_OTEL_REQUIRED=1 or
// CI is set: they never pass silently.
'use strict'
const test = require('node:test')
const assert = require('node:assert/strict')
const { ratelane, devPackage } = require('./support.cjs')

const { RateLimiter, Metrics, instrument, InvalidArgumentError, MaxWaitExceededError } = ratelane
const sdk = devPackage('@opentelemetry/sdk-metrics')
const REQUIRED = process.env.RATELANE_OTEL_REQUIRED === '1' || Boolean(process.env.CI)

function otelTest(name, fn) {
  if (sdk !== null) return test(name, fn)
  if (REQUIRED) return test(name, () => assert.fail('@opentelemetry/sdk-metrics is not installed (npm install in bindings-node)'))
  return test(name, { skip: '@opentelemetry/sdk-metrics is not installed (npm install in bindings-node)' }, () => {})
}

const CHANNEL = '/channels/100000000000000001/messages'
const OTHER = '/channels/100000000000000002/messages'

/** A meter of a MeterProvider whose reader exports, on `collect()`, to an in-memory exporter. */
function meter() {
  const exporter = new sdk.InMemoryMetricExporter(sdk.AggregationTemporality.CUMULATIVE)
  const reader = new sdk.PeriodicExportingMetricReader({ exporter, exportIntervalMillis: 3_600_000 })
  const provider = new sdk.MeterProvider({ readers: [reader] })
  return {
    meter: provider.getMeter('test'),
    /** name -> [{ attributes, value }] as exported now. */
    async collect() {
      exporter.reset()
      await reader.forceFlush()
      const out = {}
      for (const resource of exporter.getMetrics()) {
        for (const scope of resource.scopeMetrics) {
          for (const metric of scope.metrics) out[metric.descriptor.name] = metric
        }
      }
      return out
    },
    shutdown: () => provider.shutdown(),
  }
}

/** The value of the one data point of `metric` whose attributes are exactly `attributes`. */
function point(metrics, name, attributes = {}) {
  const metric = metrics[name]
  assert.ok(metric, `${name} was exported: ${Object.keys(metrics)}`)
  const found = metric.dataPoints.filter((p) => JSON.stringify(sorted(p.attributes)) === JSON.stringify(sorted(attributes)))
  assert.equal(found.length, 1, `${name} ${JSON.stringify(attributes)}: ${JSON.stringify(metric.dataPoints.map((p) => p.attributes))}`)
  return found[0].value
}

function sorted(object) {
  return Object.fromEntries(Object.entries(object).sort(([a], [b]) => (a < b ? -1 : 1)))
}

function deferred() {
  let resolve
  const promise = new Promise((res) => { resolve = res })
  return { promise, resolve }
}

const tick = () => new Promise((r) => setImmediate(r))

const ok = () => ({
  status: 200,
  headers: { 'x-ratelimit-limit': '5', 'x-ratelimit-remaining': '4', 'x-ratelimit-reset-after': '1', 'x-ratelimit-bucket': 'b1' },
})
/** A bucket 429 whose only wait is the body's and the headers' 0.02 s (no Retry-After ceiling). */
const bucket429 = () => ({
  status: 429,
  headers: {
    'x-ratelimit-limit': '5', 'x-ratelimit-remaining': '0', 'x-ratelimit-reset-after': '0.02',
    'x-ratelimit-bucket': 'b1', 'x-ratelimit-scope': 'user',
  },
  body: JSON.stringify({ message: 'You are being rate limited.', retry_after: 0.02, global: false }),
})
/** A shared-resource 429 for 30 s: longer than maxWait. */
const shared429 = () => ({
  status: 429,
  headers: { 'x-ratelimit-scope': 'shared', 'retry-after': '30' },
  body: JSON.stringify({ message: 'busy', retry_after: 30, global: false }),
})

otelTest('outcomes, 429s by scope, waits and the invalid-request budget', async () => {
  const m = meter()
  const limiter = new RateLimiter({ maxWait: 1000, minRateLimitWait: 1 })
  const metrics = instrument(limiter, m.meter, { name: 'bot' })
  assert.ok(metrics instanceof Metrics)
  let calls = 0
  assert.equal((await limiter.run('POST', CHANNEL, () => (++calls === 1 ? bucket429() : ok()))).status, 200)
  assert.equal((await limiter.run('GET', '/users/@me', () => ({ status: 403, headers: {} }))).status, 403)
  await assert.rejects(limiter.run('POST', OTHER, () => shared429()), (e) => e instanceof MaxWaitExceededError)
  await limiter.close()
  const got = await m.collect()
  const bot = { 'ratelane.limiter': 'bot' }
  const outcome = (o, extra) => point(got, 'ratelane.requests', { ...bot, 'ratelane.outcome': o, ...extra })
  assert.equal(outcome('sent'), 4)
  assert.equal(outcome('answered'), 2)
  assert.equal(outcome('retried'), 2) // both 429s; the shared one's wait then exceeded maxWait
  assert.equal(outcome('failed', { 'error.type': 'max_wait_exceeded' }), 1)
  assert.equal(got['ratelane.requests'].dataPoints.length, 4)
  assert.equal(point(got, 'ratelane.rate_limited', { ...bot, 'ratelane.scope': 'bucket' }), 1)
  assert.equal(point(got, 'ratelane.rate_limited', { ...bot, 'ratelane.scope': 'shared' }), 1)
  const wait = point(got, 'ratelane.wait.duration', bot)
  assert.equal(wait.count, 4) // one per send
  assert.ok(wait.max >= 0.02 && wait.sum >= 0.02, `the retry waited the 429's 0.02 s: ${JSON.stringify(wait)}`)
  assert.deepEqual(wait.buckets.boundaries, [0, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300])
  assert.equal(got['ratelane.wait.duration'].descriptor.unit, 's')
  // The bucket 429 and the 403 are invalid requests; the shared 429 is not.
  assert.equal(point(got, 'ratelane.invalid_requests.used', bot), 2)
  assert.equal(point(got, 'ratelane.queue.depth', bot), 0)
  assert.equal(point(got, 'ratelane.requests.in_flight', bot), 0)
  assert.equal(got['ratelane.store.unavailable'], undefined) // not shared mode: never recorded
  await m.shutdown()
})

otelTest('the gauges read the core; an aborted request counts as cancelled; detach restores the core', async () => {
  const m = meter()
  const limiter = new RateLimiter()
  const metrics = new Metrics(m.meter).attach(limiter)
  assert.throws(() => metrics.attach(limiter), InvalidArgumentError)
  const pioneer = deferred()
  const first = limiter.run('POST', CHANNEL, () => pioneer.promise)
  const controller = new AbortController()
  const second = limiter.run('POST', CHANNEL, () => ok(), { signal: controller.signal })
  await tick()
  let got = await m.collect()
  assert.equal(point(got, 'ratelane.queue.depth'), 1) // waits for the pioneer's headers
  assert.equal(point(got, 'ratelane.requests.in_flight'), 1)
  controller.abort()
  await assert.rejects(second, (e) => e.name === 'AbortError')
  pioneer.resolve(ok())
  assert.equal((await first).status, 200)
  got = await m.collect()
  assert.equal(point(got, 'ratelane.queue.depth'), 0)
  assert.equal(point(got, 'ratelane.requests', { 'ratelane.outcome': 'sent' }), 1)
  assert.equal(point(got, 'ratelane.requests', { 'ratelane.outcome': 'answered' }), 1)
  assert.equal(point(got, 'ratelane.requests', { 'ratelane.outcome': 'cancelled' }), 1)
  assert.equal(point(got, 'ratelane.wait.duration').count, 1)
  const metered = limiter._core
  metrics.detach(limiter)
  assert.notEqual(limiter._core, metered)
  assert.equal(limiter._core, metered.inner)
  await limiter.run('GET', '/users/@me', () => ok())
  got = await m.collect()
  assert.equal(point(got, 'ratelane.requests', { 'ratelane.outcome': 'sent' }), 1) // no longer recorded
  await limiter.close()
  await m.shutdown()
})

otelTest('shared mode: the store going away and coming back, as the core observed it', async () => {
  const m = meter()
  let up = false
  const store = {
    timeout: 20,
    coreSettings: () => ({ on_unavailable: 'fail_open', retry_base_ns: 10e6, retry_max_ns: 40e6 }),
    bind() {},
    reserve: () => (up ? Promise.resolve({ answer: 'granted' }) : new Promise(() => {})),
    record() {},
    close() {},
  }
  const limiter = new RateLimiter({ shared: store })
  instrument(limiter, m.meter)
  const events = []
  limiter.on('storeUnavailable', () => events.push('unavailable'))
  limiter.on('storeRecovered', () => events.push('recovered'))
  assert.equal((await limiter.run('GET', '/users/@me', () => ok())).status, 200) // fail_open: sent without the store
  up = true
  // Bounded: requests go on until the core probes the store again and sees it back.
  for (let i = 0; i < 200 && !events.includes('recovered'); i++) {
    await limiter.run('GET', '/users/@me', () => ok())
    await new Promise((r) => setTimeout(r, 5))
  }
  assert.equal(events[events.length - 1], 'recovered')
  await limiter.close()
  const got = await m.collect()
  assert.equal(point(got, 'ratelane.store.unavailable'), events.filter((e) => e === 'unavailable').length)
  assert.ok(point(got, 'ratelane.store.unavailable') >= 1)
  assert.equal(point(got, 'ratelane.store.recovered'), 1)
  await m.shutdown()
})

test('Metrics refuses what is not a Meter', () => {
  assert.throws(() => new Metrics(), InvalidArgumentError)
  assert.throws(() => new Metrics({ createCounter() {} }), InvalidArgumentError)
  assert.throws(() => instrument(new RateLimiter(), null), InvalidArgumentError)
})
