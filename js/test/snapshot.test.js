// First contact from JS: route groups as an option, and a limiter's snapshot carried across a
// restart (core Limiter.snapshot/restore and RateLimiter.snapshot/restore). The behaviour is the
// core's (the vectors replay it); these tests check the surface: types, classes, codes, clocks.
'use strict'
const test = require('node:test')
const assert = require('node:assert/strict')
const { core, ratelane } = require('./support.cjs')

const {
  RateLimiter, DeadlineExceededError, InvalidArgumentError, InvalidConfigError, LimiterBusyError,
  SnapshotError, SnapshotForeignError, SnapshotVersionError, SnapshotMalformedError, USAGE_CLASSES,
} = ratelane

const WALL = 1_700_000_000_000
const SECOND = 1_000_000_000

function pausedSnapshot(untilMs, takenAtMs = WALL) {
  return {
    format: 'ratelane.snapshot',
    version: 1,
    taken_at_ms: takenAtMs,
    profile: 'discord',
    routes: [
      { route: 'POST /channels/:id/messages', bucket: 'msgs' },
      { route: 'DELETE /channels/:id/messages/:id', bucket: 'msgs' },
    ],
    windows: [{ bucket: 'msgs', window_ns: SECOND }],
    global_pauses: [{ identity: '', until_ms: untilMs }],
    host_pause: null,
    invalid_requests_ms: [takenAtMs - 1000],
  }
}

test('routeGroups is an option; a bad group is InvalidConfigError', () => {
  assert.equal('route_groups' in new RateLimiter().config, false)
  assert.deepEqual(new RateLimiter({ routeGroups: [] }).config.route_groups, [])
  assert.deepEqual(new RateLimiter({ routeGroups: [['GET /a', 'POST /a']] }).config.route_groups, [['GET /a', 'POST /a']])
  assert.throws(() => new RateLimiter({ routeGroups: [['GET /a']] }), (e) => e instanceof InvalidConfigError && /route_groups\[0\]/.test(e.message))
})

test('core: snapshot and restore round trip, and the restored pause holds the first request', () => {
  const limiter = new core.Limiter()
  limiter.restore(0, WALL + 10_000, JSON.stringify(pausedSnapshot(WALL + 60_000)))
  assert.equal(limiter.drain().at(-1).type, 'idle')
  const taken = JSON.parse(limiter.snapshot(0, WALL + 10_000))
  assert.deepEqual(taken.routes, pausedSnapshot(0).routes)
  assert.deepEqual(taken.global_pauses, [{ identity: '', until_ms: WALL + 60_000 }])
  assert.deepEqual(taken.invalid_requests_ms, [WALL - 1000])
  limiter.enqueue(0, { method: 'POST', path: '/channels/1/messages' })
  const out = limiter.drain()
  assert.equal(out.length, 1)
  assert.equal(out[0].type, 'wait_until')
  assert.equal(out[0].atNs, 50 * SECOND)
})

test('core: each refusal throws its code; the driver gives each its class', () => {
  const cases = [
    ['not json', 'snapshot_foreign', SnapshotForeignError],
    [JSON.stringify({ format: 'other', version: 1 }), 'snapshot_foreign', SnapshotForeignError],
    [JSON.stringify({ ...pausedSnapshot(0), profile: 'github' }), 'snapshot_foreign', SnapshotForeignError],
    [JSON.stringify({ format: 'ratelane.snapshot', version: 3 }), 'snapshot_version', SnapshotVersionError],
    [JSON.stringify({ ...pausedSnapshot(0), routes: 'nope' }), 'snapshot_malformed', SnapshotMalformedError],
  ]
  for (const [text, code, cls] of cases) {
    const limiter = new RateLimiter()
    assert.throws(() => limiter.restore(text), (e) => e instanceof cls && e instanceof SnapshotError && e.code === code, code)
    assert.equal(USAGE_CLASSES[code], cls)
  }
  const busy = new core.Limiter()
  busy.enqueue(0, { method: 'GET', path: '/users/@me' })
  assert.throws(() => busy.restore(0, WALL, JSON.stringify(pausedSnapshot(WALL))), (e) => e.code === 'limiter_busy')
  assert.throws(() => new core.Limiter().restore(0, WALL, pausedSnapshot(WALL)), (e) => e.code === 'invalid_argument')
  assert.throws(() => new RateLimiter().restore({}), (e) => e instanceof InvalidArgumentError)
  assert.ok(LimiterBusyError.prototype instanceof Error)
})

test('the driver restores on its own clocks: a restored global pause fails a short deadline at once', async () => {
  const limiter = new RateLimiter()
  const nowMs = Date.now()
  limiter.restore(JSON.stringify(pausedSnapshot(nowMs + 60_000, nowMs)))
  let sent = false
  await assert.rejects(limiter.run('GET', '/users/@me', () => { sent = true }, { deadline: 1000 }), DeadlineExceededError)
  assert.equal(sent, false)
  const taken = JSON.parse(limiter.snapshot())
  assert.equal(taken.routes[0].bucket, 'msgs')
  assert.ok(taken.global_pauses[0].until_ms >= nowMs + 59_000)
  await limiter.close()
})
