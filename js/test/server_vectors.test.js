// Replays every case of every tests/vectors/server_*.json against the core module
// (RATELANE_CORE): each step's answer, in the vectors' JSON form, must equal its `expect`
// exactly (every decision field, both rendered header sets, the errors, and the store's
// `store_len` and `untracked` after the step). The reference replay is
// core/tests/server_vectors.rs; this file reads the same fields the same way.
'use strict'
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { repo, core } = require('./support.cjs')
const { MS, inMemoryStore, decisionForm } = require('./server_forms.cjs')

const dir = path.join(repo, 'tests', 'vectors')
const files = fs.readdirSync(dir).filter((f) => f.startsWith('server_') && f.endsWith('.json')).sort()
function scheduledForm(s) {
  assert.deepEqual(Object.keys(s), ['runNow', 'releaseAtNs', 'waiting'])
  return { run_now: s.runNow, release_at_ns: s.releaseAtNs, waiting: s.waiting }
}

/** The error a step threw, in the vectors' form. */
function errorForm(error) {
  assert.ok(error instanceof Error, `an Error: ${error}`)
  assert.equal(typeof error.code, 'string', `the error has a code: ${error.message}`)
  assert.ok(error.message.length > 0)
  if (error.code === 'insufficient_capacity') {
    return { error: error.code, requested: error.requested, capacity: error.capacity }
  }
  return { error: error.code }
}

function answer(store, step, policy) {
  const now = step.at_ms * MS
  try {
    switch (step.op) {
      case 'check':
        if ('n' in step) return decisionForm(store.checkN(step.key, now, step.n), policy)
        if ('factor' in step) return decisionForm(store.checkScaled(step.key, now, step.factor), policy)
        return decisionForm(store.check(step.key, now), policy)
      case 'schedule':
        return scheduledForm(store.schedule(step.key, now))
      case 'release':
        return { released: store.release(step.key, now) }
      default:
        return assert.fail(`unknown op ${step.op}`)
    }
  } catch (error) {
    if (error instanceof assert.AssertionError) throw error
    return errorForm(error)
  }
}

function replay(file) {
  const vectors = JSON.parse(fs.readFileSync(path.join(dir, file), 'utf8'))
  let steps = 0
  for (const c of vectors.cases) {
    if ('expect_error' in c) {
      assert.throws(() => inMemoryStore(core, vectors.algorithm, c.config), (e) => {
        assert.deepEqual(errorForm(e), { error: c.expect_error }, `case "${c.name}"`)
        return true
      }, `case "${c.name}": the config is rejected`)
      continue
    }
    const store = inMemoryStore(core, vectors.algorithm, c.config)
    assert.equal(store.maxKeys, c.config.max_keys, `case "${c.name}": maxKeys`)
    c.steps.forEach((step, i) => {
      const outcome = answer(store, step, c.config.policy)
      outcome.store_len = store.len
      outcome.untracked = store.untracked
      assert.deepEqual(outcome, step.expect, `case "${c.name}", step ${i}: ${JSON.stringify(step)}`)
      steps += 1
    })
  }
  return steps
}

test('the vector directory holds the three server algorithms', () => {
  assert.deepEqual(files, ['server_fixed_window.json', 'server_gcra.json', 'server_leaky_bucket.json'])
})

for (const file of files) {
  test(`vector ${file}`, () => {
    assert.ok(replay(file) > 20, 'more than 20 steps replayed')
  })
}
