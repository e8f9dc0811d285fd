// Replays every tests/vectors/client_*.json against the core module (RATELANE_CORE), once
// draining with pollOutput(), once with drain(), and once through the positional surface the
// driver uses (enqueueParts, respond, answerReservation, drainPacked; js/CONTRACT.md, "The
// positional surface"): the outputs, results and counts must be exactly the recorded ones
// each time.
'use strict'
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { repo, core, native, ratelane } = require('./support.cjs')

const dir = path.join(repo, 'tests', 'vectors')
const files = fs.readdirSync(dir).filter((f) => f.startsWith('client_') && f.endsWith('.json')).sort()

function request(r) {
  const spec = { method: r.method, path: r.path }
  if ('major' in r) spec.major = r.major
  if ('identity' in r) spec.identity = r.identity
  if ('deadline_ns' in r) spec.deadlineNs = r.deadline_ns
  if ('defer_after_ns' in r) spec.deferAfterNs = r.defer_after_ns
  if ('priority' in r) spec.priority = r.priority
  if ('idempotent' in r) spec.idempotent = r.idempotent
  if ('global_exempt' in r) spec.globalExempt = r.global_exempt
  if ('sub_limit' in r) spec.subLimit = r.sub_limit
  if ('body_keys' in r) spec.bodyKeys = r.body_keys
  if ('costs' in r) spec.costs = r.costs
  if ('model' in r) spec.model = r.model
  return spec
}

function response(step) {
  const spec = { status: step.status, headers: step.headers }
  if (step.body) {
    spec.body = { retryAfter: step.body.retry_after, global: step.body.global }
    const cost = step.body.cost
    if (cost) {
      spec.body.cost = {
        requested: cost.requested, actual: cost.actual, maximumAvailable: cost.maximum_available,
        currentlyAvailable: cost.currently_available, restoreRate: cost.restore_rate,
      }
    }
    if (step.body.errors) spec.body.errors = step.body.errors
    if (step.body.usage) spec.body.usage = step.body.usage
  }
  if ('wall_clock_ms' in step) spec.wallClockMs = step.wall_clock_ms
  return spec
}

/** A core output in the vectors' JSON form. */
function vectorForm(o) {
  switch (o.type) {
    case 'send':
      return { send: o.id }
    case 'fail': {
      const v = { fail: o.id, code: o.code }
      assert.equal(typeof o.message, 'string')
      if (o.code === 'deadline_exceeded') v.predicted_send_at_ns = o.predictedSendAtNs
      if (o.predictedWaitNs !== undefined) v.predicted_wait_ns = o.predictedWaitNs
      if (o.code === 'deferred') v.retry_at_ns = o.retryAtNs
      else assert.equal(o.retryAtNs, undefined, 'retryAtNs only on deferred')
      if (o.code === 'insufficient_capacity') {
        v.dimension = o.dimension
        v.cost = o.cost
        v.limit = o.limit
      } else {
        assert.deepEqual([o.dimension, o.cost, o.limit], [undefined, undefined, undefined], 'dimension, cost, limit only on insufficient_capacity')
      }
      if (o.attempts !== undefined) v.attempts = o.attempts
      return v
    }
    case 'rate_limited':
      return { observe: 'rate_limited', id: o.id, scope: o.scope, retry_after_ns: o.retryAfterNs }
    case 'bucket_learned':
      return { observe: 'bucket_learned', route: o.route, bucket: o.bucket }
    case 'invalid_request_warning':
      return { observe: 'invalid_request_warning', count: o.count, limit: o.limit }
    case 'reserve': {
      const r = o.reservation
      assert.equal(r.id, o.id)
      const v = {
        reserve: o.id, identity: r.identity, route: r.route, major: r.major, bucket: r.bucket,
        counts_global: r.countsGlobal, global_limit: r.globalLimit, global_want: r.globalWant, global_window_ns: r.globalWindowNs,
        margin_ns: r.marginNs, invalid_limit: r.invalidLimit, invalid_window_ns: r.invalidWindowNs,
      }
      // After a store outage only: the files hold these when set.
      if (r.processesSinceNs !== null) v.processes_since_ns = r.processesSinceNs
      if (r.reporting) v.reporting = true
      if (r.unrecordedNs.length > 0) v.unrecorded_ns = r.unrecordedNs
      if (r.grantedNs.length > 0) v.granted_ns = r.grantedNs
      return v
    }
    case 'share':
      return updateForm(o.update)
    case 'store_unavailable':
      return { observe: 'store_unavailable', id: o.id, retry_at_ns: o.retryAtNs }
    case 'store_recovered':
      return { observe: 'store_recovered' }
    case 'wait_until':
      return { wait_until_ns: o.atNs }
    case 'idle':
      return { idle: true }
    default:
      assert.fail(`unknown output ${JSON.stringify(o)}`)
  }
}

/** A `share` output's update in the vectors' JSON form (exactly the variant's fields). */
function updateForm(u) {
  const where = { id: u.id, identity: u.identity, route: u.route, major: u.major, bucket: u.bucket }
  switch (u.kind) {
    case 'bucket':
      return {
        share: 'bucket', ...where, unlimited: u.unlimited, limit: u.limit, remaining: u.remaining,
        reset_after_ns: u.resetAfterNs, window_ns: u.windowNs,
      }
    case 'release':
      return { share: 'release', ...where, reached: u.reached, window_ns: u.windowNs }
    case 'hold':
      return {
        share: 'hold', scope: u.scope, identity: u.identity, route: u.route, major: u.major,
        bucket: u.bucket, retry_after_ns: u.retryAfterNs,
      }
    case 'invalid':
      return { share: 'invalid', id: u.id, window_ns: u.windowNs }
    default:
      assert.fail(`unknown update ${JSON.stringify(u)}`)
  }
}

/** A vector's `reservation` step's answer in the contract's form. */
function answer(step) {
  const a = step.answer === 'denied'
    ? { answer: 'denied', retryAfterNs: step.retry_after_ns, scope: step.scope }
    : { answer: step.answer }
  if (step.processes !== undefined) a.processes = step.processes
  if (step.leased !== undefined) a.leased = step.leased
  // The store's clock in microseconds (a JS number holds them exactly; the vectors have ns).
  if (step.store_time_ns !== undefined) a.storeTimeUs = step.store_time_ns / 1000
  return a
}

function attempt(fn, wrap) {
  try {
    return wrap(fn())
  } catch (error) {
    assert.equal(typeof error.code, 'string', `a thrown error carries a code: ${error}`)
    assert.ok(error instanceof Error)
    return { error: error.code }
  }
}

/** The request of a vector as `enqueueParts`'s arguments after the time. */
function requestParts(r) {
  const costs = r.costs || null
  return [r.method, r.path, r.identity, r.major, r.deadline_ns, r.defer_after_ns, r.priority, r.idempotent,
    r.global_exempt, r.sub_limit, r.body_keys, costs && Object.keys(costs), costs && Object.values(costs), r.model]
}

/** A response step as `respond`'s arguments after the time and id (headers as a flat list). */
function responseParts(step) {
  const body = step.body || {}
  const c = body.cost
  const cost = c ? [c.requested, c.actual, c.maximum_available, c.currently_available, c.restore_rate].map((v) => v ?? null) : null
  const usage = body.usage ? Object.fromEntries(Object.entries(body.usage).filter(([, v]) => typeof v === 'number')) : null
  return [step.status, step.headers.flat(), step.wall_clock_ms, body.retry_after, body.global, cost, body.errors,
    usage && Object.keys(usage), usage && Object.values(usage)]
}

/** The drain through drainPacked, in the vectors' form; kind 3: takeHeld() and drain on. */
function drainPacked(limiter) {
  const packed = limiter.drainPacked()
  assert.ok(packed.length >= 2 && packed.length % 2 === 0, `pairs: ${packed}`)
  const out = []
  for (let i = 0; i < packed.length; i += 2) {
    const [kind, value] = [packed[i], packed[i + 1]]
    const last = i + 2 === packed.length
    if (kind === 0) out.push({ send: value })
    else if (kind === 1) out.push({ wait_until_ns: value })
    else if (kind === 2) out.push({ idle: true })
    else if (kind === 3) out.push(vectorForm(ratelane.outputObject(limiter.takeHeld())), ...drainPacked(limiter))
    else assert.fail(`unknown kind ${kind}`)
    assert.equal(kind !== 0, last, `kinds 1, 2 and 3 end the packed drain: ${packed}`)
  }
  return out
}

function drainWith(limiter, mode) {
  if (mode === 'fast') return drainPacked(limiter)
  if (mode === 'drain') return limiter.drain().map(vectorForm)
  const out = []
  for (;;) {
    const o = limiter.pollOutput()
    out.push(vectorForm(o))
    if (o.type === 'wait_until' || o.type === 'idle') return out
  }
}

function replay(vector, mode) {
  const Limiter = mode === 'fast' ? native.Limiter : core.Limiter
  let limiter = new Limiter(JSON.stringify(vector.config))
  assert.deepEqual(JSON.parse(limiter.configJson()), vector.config, 'config round trip')
  vector.steps.forEach((step, i) => {
    const where = `step ${i} (${step.op} at ${step.at_ns})`
    const now = step.at_ns
    let result
    switch (step.op) {
      case 'enqueue': {
        const r = step.request
        result = mode === 'fast'
          ? attempt(() => limiter.enqueueParts(now, ...requestParts(r)), (id) => ({ id }))
          : attempt(() => limiter.enqueue(now, request(r)), (id) => ({ id }))
        break
      }
      case 'response':
        result = mode === 'fast'
          ? attempt(() => limiter.respond(now, step.id, ...responseParts(step)), (d) => ({ disposition: d }))
          : attempt(() => limiter.handleResponse(now, step.id, response(step)), (d) => ({ disposition: d }))
        break
      case 'failure':
        result = attempt(() => limiter.handleFailure(now, step.id, step.failure), (d) => ({ disposition: d }))
        break
      case 'written':
        result = attempt(() => limiter.handleWritten(now, step.id), () => ({ ok: true }))
        break
      case 'cancel':
        result = attempt(() => limiter.cancel(now, step.id), () => ({ ok: true }))
        break
      case 'timeout':
        result = attempt(() => limiter.handleTimeout(now), () => ({ ok: true }))
        break
      case 'close':
        result = attempt(() => limiter.close(now), () => ({ ok: true }))
        break
      case 'predict':
        result = mode === 'fast'
          ? attempt(() => limiter.predictParts(now, requestParts(step.request)), (t) => ({ send_at_ns: t }))
          : attempt(() => limiter.predict(now, request(step.request)), (t) => ({ send_at_ns: t }))
        break
      case 'reservation':
        result = mode === 'fast'
          ? attempt(() => {
            const a = answer(step)
            return limiter.answerReservation(now, step.id, a.answer, a.processes, a.leased, a.storeTimeUs, a.retryAfterNs, a.scope)
          }, () => ({ ok: true }))
          : attempt(() => limiter.handleReservation(now, step.id, answer(step)), () => ({ ok: true }))
        break
      case 'snapshot':
        result = attempt(() => limiter.snapshot(now, step.wall_clock_ms), (text) => ({ snapshot: JSON.parse(text) }))
        break
      case 'restart':
        // A restarted process: a new limiter of the same configuration.
        limiter = new Limiter(JSON.stringify(vector.config))
        result = { ok: true }
        break
      case 'restore':
        result = attempt(() => limiter.restore(now, step.wall_clock_ms, JSON.stringify(step.snapshot)), () => ({ ok: true }))
        break
      default:
        assert.fail(`${where}: unknown op`)
    }
    assert.deepEqual(result, step.result, `${where}: result`)
    const getter = step.op === 'predict' || step.op === 'snapshot'
    const outputs = getter ? [] : drainWith(limiter, mode)
    assert.deepEqual(outputs, step.outputs, `${where}: outputs`)
    assert.equal(limiter.queued, step.queued, `${where}: queued`)
    assert.equal(limiter.inFlight, step.in_flight, `${where}: in_flight`)
    if ('shared' in vector.config) assert.equal(limiter.reserving, step.reserving, `${where}: reserving`)
  })
}

test('the vector directory holds client scenarios', () => {
  assert.ok(files.length >= 30, `found ${files.length}`)
  const shared = files.filter((f) => 'shared' in JSON.parse(fs.readFileSync(path.join(dir, f), 'utf8')).config)
  assert.ok(shared.length >= 8, `shared-mode scenarios: ${shared.length}`)
})

for (const file of files) {
  test(`vector ${file}`, () => {
    const vector = JSON.parse(fs.readFileSync(path.join(dir, file), 'utf8'))
    assert.equal(vector.kind, 'client')
    replay(vector, 'pollOutput')
    replay(vector, 'drain')
    replay(vector, 'fast')
  })
}
