// The driver's OpenTelemetry metrics (`instrument`), printed after a bot's busy second.
//
//   npm install ./bindings-node @opentelemetry/api @opentelemetry/sdk-metrics
//   node examples/node/metrics.js
//
// No network: `send` asks ratelane's model of Discord (`SimServer`) in-process, which answers
// with Discord's headers and 429 bodies in real time. Messages are limited to 5 per second per
// channel and a channel rename to 2 per 10 minutes (a sub-limit the bot learns from its 429).
// The bot renames a channel three times with maxWait 5 s (the third rename would wait ten
// minutes, so it fails at once), then posts 24 messages to 3 channels at once (3 per channel
// wait for the next window). The same code works with the wasm package (`ratelane-wasm`).
//
// In a real program, give the MeterProvider an exporting reader (OTLP, Prometheus, ...)
// instead of the in-memory one read here.
'use strict'
const path = require('node:path')
const { metrics } = require('@opentelemetry/api')
const {
  MeterProvider, PeriodicExportingMetricReader, InMemoryMetricExporter, AggregationTemporality,
} = require('@opentelemetry/sdk-metrics')
const { RateLimiter, RateLimitError, SimServer, instrument } = require(path.join(__dirname, '..', '..', 'bindings-node'))

async function main() {
  const exporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE)
  const reader = new PeriodicExportingMetricReader({ exporter, exportIntervalMillis: 60_000 })
  metrics.setGlobalMeterProvider(new MeterProvider({ readers: [reader] }))

  const discord = new SimServer(JSON.stringify({
    buckets: { msg: { limit: 5, window_ns: 1e9 }, channel: { limit: 5, window_ns: 10e9 } },
    routes: {
      'POST /channels/:id/messages': { bucket: 'msg' },
      'PATCH /channels/:id': { bucket: 'channel', sub_limit: { limit: 2, window_ns: 600e9 } },
    },
    global: null,
  }))
  const start = performance.now()
  const send = (method, path) => () => {
    const answer = discord.handle(Math.round((performance.now() - start) * 1e6), { method, path })
    return { status: answer.status, headers: answer.headers, body: answer.bodyText }
  }

  const limiter = new RateLimiter({ maxWait: 5_000 })
  instrument(limiter, metrics.getMeter('ratelane'), { name: 'example-bot' })

  const renames = []
  for (let i = 0; i < 3; i++) { // one after the other: the third meets the learned sub-limit
    try {
      renames.push((await limiter.run('PATCH', '/channels/100', send('PATCH', '/channels/100'))).status)
    } catch (error) {
      if (!(error instanceof RateLimitError)) throw error
      renames.push(error.code)
    }
  }
  const posts = await Promise.all(Array.from({ length: 24 }, (_, n) => {
    const route = `/channels/${100 + (n % 3)}/messages`
    return limiter.run('POST', route, send('POST', route)).then((res) => res.status)
  }))
  await limiter.close()
  console.log(`messages: ${[...new Set(posts)]} x${posts.length}, renames: ${renames.join(', ')}`)

  await reader.forceFlush()
  const last = exporter.getMetrics().at(-1)
  for (const scope of last.scopeMetrics) {
    for (const metric of scope.metrics) {
      console.log(`${metric.descriptor.name} (${metric.descriptor.unit})`)
      for (const point of metric.dataPoints) {
        const { 'ratelane.limiter': _, ...attributes } = point.attributes
        const value = typeof point.value === 'number'
          ? point.value
          : `count=${point.value.count} sum=${point.value.sum.toFixed(3)} max=${point.value.max.toFixed(3)}`
        console.log(`  ${Object.keys(attributes).length ? JSON.stringify(attributes) : '-'} ${value}`)
      }
    }
  }
  await reader.shutdown()
}

main().catch((error) => {
  console.error(error)
  process.exitCode = 1
})
