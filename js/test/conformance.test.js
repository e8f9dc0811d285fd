// The drivers' conformance table (tests/conformance/drivers.json, docs/driver-contract.md) replayed by
// the Promise driver (js/driver.js) in virtual time: the driver gets the host's clocks and
// timers from `host.time` (a scheduler here), its core is the core module under test
// (RATELANE_CORE: napi or wasm) with every input recorded, and each request's `send` returns a
// promise the table settles. The Python driver replays the same table.
'use strict'
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { native, createRatelane, repo } = require('./support.cjs')

const table = JSON.parse(fs.readFileSync(path.join(repo, 'tests', 'conformance', 'drivers.json'), 'utf8'))

/** Lets every promise chain that can move move (the driver awaits bodies and stores). */
async function settle() {
  for (let i = 0; i < 8; i++) await new Promise((resolve) => setImmediate(resolve))
}

/** Virtual time in ms: timers run in order of time, then of arming; nothing else moves it. */
class VirtualTime {
  constructor() {
    this.nowMs = 0
    this.timers = []
    this.seq = 0
    this.host = {
      now: () => this.nowMs,
      wallClock: () => 1_700_000_000_000 + this.nowMs,
      setTimeout: (fn, ms) => this.at(this.nowMs + Math.max(0, ms), fn),
      clearTimeout: (timer) => { if (timer) timer.cleared = true },
      nextTurn: (fn) => { this.at(this.nowMs, fn) },
    }
  }

  at(when, fn) {
    const timer = { when, seq: this.seq++, fn, cleared: false }
    this.timers.push(timer)
    return timer
  }

  /** Runs every timer due until `until` (ms), settling promises between them. */
  async runUntil(until) {
    for (;;) {
      await settle()
      this.timers = this.timers.filter((t) => !t.cleared)
      let next = null
      for (const t of this.timers) {
        if (next === null || t.when < next.when || (t.when === next.when && t.seq < next.seq)) next = t
      }
      if (next === null || next.when > until) {
        this.nowMs = Math.max(this.nowMs, until)
        return
      }
      this.timers.splice(this.timers.indexOf(next), 1)
      this.nowMs = Math.max(this.nowMs, next.when)
      next.fn()
    }
  }
}

const ms = (ns) => Math.round(ns / 1e3) / 1e3

/** The core module under test with every input the driver makes recorded as the table writes it. */
function recordingCore(calls, names) {
  const nameOf = (id) => names.get(id) || `#${id}`
  class Limiter extends native.Limiter {
    enqueueParts(nowNs, method, p, ...rest) {
      const id = super.enqueueParts(nowNs, method, p, ...rest)
      names.set(id, names.pending.shift())
      calls.push(['enqueue', ms(nowNs), nameOf(id), method, p])
      return id
    }
    respond(nowNs, id, status, headers, wallClockMs, ...hints) {
      calls.push(['respond', ms(nowNs), nameOf(id), status, null, typeof wallClockMs === 'number'])
      return super.respond(nowNs, id, status, headers, wallClockMs, ...hints)
    }
    respondBody(nowNs, id, status, headers, wallClockMs, body) {
      const text = typeof body === 'string' ? body : Buffer.from(body).toString('utf8')
      calls.push(['respond', ms(nowNs), nameOf(id), status, text, typeof wallClockMs === 'number'])
      return super.respondBody(nowNs, id, status, headers, wallClockMs, body)
    }
    handleFailure(nowNs, id, failure) {
      calls.push(['failure', ms(nowNs), nameOf(id), failure])
      return super.handleFailure(nowNs, id, failure)
    }
    handleWritten(nowNs, id) {
      calls.push(['written', ms(nowNs), nameOf(id)])
      return super.handleWritten(nowNs, id)
    }
    cancel(nowNs, id) {
      calls.push(['cancel', ms(nowNs), nameOf(id)])
      return super.cancel(nowNs, id)
    }
    handleTimeout(nowNs) {
      calls.push(['timeout', ms(nowNs)])
      return super.handleTimeout(nowNs)
    }
    answerReservation(nowNs, id, answer, ...rest) {
      calls.push(['reservation', ms(nowNs), nameOf(id), answer])
      return super.answerReservation(nowNs, id, answer, ...rest)
    }
    close(nowNs) {
      calls.push(['close', ms(nowNs)])
      return super.close(nowNs)
    }
  }
  return Object.assign({}, native, { Limiter })
}

/** The case's core settings (the core's JSON form) as the driver's options: names and units from the core's table. */
function options(config) {
  const kinds = new Map(native.SETTINGS)
  const out = {}
  for (const [key, value] of Object.entries(config)) {
    if (key === 'shared') continue
    const kind = kinds.get(key)
    assert.ok(kind, `the table's setting ${key} is not the core's`)
    const name = key.replace(/_ns$/, '').replace(/_([a-z])/g, (_, c) => c.toUpperCase())
    out[name] = kind.startsWith('nanos') && value !== null ? value / 1e6 : value
  }
  return out
}

/** A store of the driver's interface (js/CONTRACT.md) whose answers the table gives. */
function tableStore(settings, reservations) {
  return {
    timeout: 1000,
    coreSettings: () => ({ ...settings }),
    bind: () => {},
    reserve: (reservation) => new Promise((resolve) => { reservations.set(reservation.id, resolve) }),
    record: () => {},
    close: () => {},
  }
}

/** A table answer (`answer`, `retry_after_ns`, `scope`, `processes`) as the JS store interface gives it. */
function storeAnswer(a) {
  const out = { answer: a.answer }
  if (a.retry_after_ns !== undefined) out.retryAfterNs = a.retry_after_ns
  if (a.scope !== undefined) out.scope = a.scope
  if (a.processes !== undefined) out.processes = a.processes
  return out
}

function transportError(kind) {
  const codes = { refused: 'ECONNREFUSED', reset: 'ECONNRESET' }
  return Object.assign(new Error(`transport: ${kind}`), { code: codes[kind] })
}

async function replay(c) {
  const vt = new VirtualTime()
  const calls = []
  const names = new Map()
  names.pending = []
  const { RateLimiter } = createRatelane(recordingCore(calls, names), { time: vt.host })
  const reservations = new Map()
  const opts = options(c.config)
  if (c.config.shared) opts.shared = tableStore(c.config.shared, reservations)
  const limiter = new RateLimiter(opts)
  const idOf = (name) => [...names].find(([, n]) => n === name)[0]
  const pending = new Map()
  const aborts = new Map()
  const outcomes = {}
  const act = {
    run(step) {
      const controller = new AbortController()
      aborts.set(step.run, controller)
      const send = () => {
        calls.push(['send', vt.nowMs, step.run])
        return new Promise((resolve, reject) => { pending.set(step.run, { resolve, reject }) })
      }
      const runOptions = { signal: controller.signal }
      if (step.costs) runOptions.costs = step.costs
      if (step.timeout !== undefined) runOptions.deadline = step.timeout
      names.pending.push(step.run)
      limiter.run(step.method, step.path, send, runOptions).then(
        (response) => { outcomes[step.run] = { status: response.status } },
        (error) => { outcomes[step.run] = { error: error.name === 'AbortError' ? 'aborted' : error.code } },
      )
    },
    answer(step) {
      const send = pending.get(step.answer)
      if (send === undefined) return calls.push(['not_sent', vt.nowMs, step.answer]) // shows in the diff
      pending.delete(step.answer)
      send.resolve({ status: step.status, headers: step.headers, body: step.body === undefined ? null : step.body })
    },
    fail(step) {
      const send = pending.get(step.fail)
      if (send === undefined) return calls.push(['not_sent', vt.nowMs, step.fail])
      pending.delete(step.fail)
      send.reject(transportError(step.error))
    },
    abort(step) { aborts.get(step.abort).abort() },
    close() { limiter.close() },
    store(step) {
      const id = idOf(step.store)
      const resolve = reservations.get(id)
      if (resolve === undefined) return calls.push(['not_reserving', vt.nowMs, step.store])
      reservations.delete(id)
      resolve(storeAnswer(step.reply))
    },
  }
  for (const step of c.steps) {
    const kind = Object.keys(act).find((k) => k in step)
    vt.at(step.at, () => act[kind](step))
  }
  await vt.runUntil(c.until !== undefined ? c.until : 60_000)
  return { calls, outcomes }
}

/** Equal, a call's time within 1 ms after the table's (a timer fires on the driver's clock's tick). */
function sameCalls(actual, expected) {
  if (actual.length !== expected.length) return false
  return actual.every((call, i) => {
    const want = expected[i]
    if (call.length !== want.length || call[0] !== want[0]) return false
    const late = call[1] - want[1]
    return late >= 0 && late <= 1 && call.slice(2).every((v, j) => JSON.stringify(v) === JSON.stringify(want[j + 2]))
  })
}

for (const c of table.cases) {
  test(`conformance: ${c.name}`, async () => {
    const { calls, outcomes } = await replay(c)
    if (process.env.RATELANE_CONFORMANCE_PRINT) console.log(`${c.name}\n${calls.map((x) => JSON.stringify(x)).join("\n")}\n${JSON.stringify(outcomes)}`)
    assert.ok(sameCalls(calls, c.calls), `calls into the core:\n${calls.map((x) => JSON.stringify(x)).join('\n')}\nexpected:\n${c.calls.map((x) => JSON.stringify(x)).join('\n')}`)
    assert.deepEqual(outcomes, c.outcomes)
  })
}
