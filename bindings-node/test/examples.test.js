// The Node examples run as a user would run them (after `npm install ./bindings-node`).
'use strict'
const test = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const { execFileSync } = require('node:child_process')

const examples = path.join(__dirname, '..', '..', 'examples', 'node')

test('examples/node/protect_endpoint.js serves with rate-limit headers', () => {
  const out = execFileSync(process.execPath, [path.join(examples, 'protect_endpoint.js')], { encoding: 'utf8', timeout: 60_000 })
  const lines = out.split('\n').filter((l) => l.startsWith('request '))
  assert.equal(lines.length, 7, out)
  // Which requests are refused depends on how fast they go out; every answer carries the fields.
  assert.match(lines[0], /^request 1: 200 {2}ratelimit: "per-client";r=4;t=\d+/)
  for (const line of lines) assert.match(line, /: (200|429) {2}ratelimit: "per-client";r=\d/)
  assert.match(out, /keys tracked: 1/)
})

test('examples/node/two_processes.js: two processes share limits through Redis, no 429', {
  skip: process.env.RATELANE_REDIS_URL ? false : 'RATELANE_REDIS_URL is not set (scripts/tests.d/20-node.sh sets it)',
}, () => {
  const out = execFileSync(process.execPath, [path.join(examples, 'two_processes.js'), process.env.RATELANE_REDIS_URL], { encoding: 'utf8', timeout: 120_000 })
  assert.match(out, /^process 0: \{"200":40\}$/m, out)
  assert.match(out, /^process 1: \{"200":40\}$/m, out)
  assert.match(out, /server \(shared through Redis\): 80 x 200, 0 x 429/, out)
})

test('examples/node/github_client.js: the github pack keeps to the budgets; only the first burst meets the hidden secondary limit', () => {
  const env = { ...process.env }
  delete env.GITHUB_TOKEN // always the local imitation
  const out = execFileSync(process.execPath, [path.join(examples, 'github_client.js')], { encoding: 'utf8', timeout: 120_000, env })
  assert.match(out, /spends the "core" budget/, out)
  assert.match(out, /spends the "search" budget/, out)
  assert.match(out, /^30 issues and 5 searches in [\d.]+ s: \{"HTTP 200":35\}$/m, out)
  // 15 in the first second against a hidden 10 per second: 5 refusals, then none (the engine
  // keeps to the 10 the token was admitted).
  assert.match(out, /^server: 35 x 200, 5 x 403, 0 x 429$/m, out)
})

test('examples/node/metrics.js prints every instrument, the sub-limit 429 and the failure', () => {
  // The example's OpenTelemetry packages are this package's devDependencies here.
  const env = { ...process.env, NODE_PATH: path.join(__dirname, '..', 'node_modules') }
  const out = execFileSync(process.execPath, [path.join(examples, 'metrics.js')], { encoding: 'utf8', timeout: 60_000, env })
  assert.match(out, /^messages: 200 x24, renames: 200, 200, max_wait_exceeded$/m, out)
  for (const name of ['ratelane.requests ({request})', 'ratelane.wait.duration (s)', 'ratelane.rate_limited ({response})',
    'ratelane.queue.depth ({request})', 'ratelane.requests.in_flight ({request})', 'ratelane.invalid_requests.used ({response})']) {
    assert.ok(out.includes(`\n${name}\n`), `${name} in\n${out}`)
  }
  assert.match(out, /^ {2}\{"ratelane.outcome":"failed","error.type":"max_wait_exceeded"\} 1$/m, out)
  assert.match(out, /^ {2}\{"ratelane.scope":"sub_limit"\} 1$/m, out)
  assert.match(out, /^ {2}- count=\d+ sum=/m, out)
})
