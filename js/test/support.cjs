// Test support shared by js/test/*.test.js: loads the core module under test and the driver.
//
// RATELANE_CORE names the core module (js/CONTRACT.md) to test, as a path: the napi addon
// with its server-side stores (bindings-node/core.cjs) or the wasm package's Node build of the
// core (bindings-wasm/pkg/node/core.cjs). Default: the napi core of this repository.
// The driver is js/driver.js itself, so both packages test the same source.
'use strict'
const fs = require('node:fs')
const path = require('node:path')

const repo = path.join(__dirname, '..', '..')
const corePath = path.resolve(process.env.RATELANE_CORE || path.join(repo, 'bindings-node', 'core.cjs'))

function loadCore() {
  return require(corePath)
}

/** `createRatelane` from the shared driver source (no package build needed). */
function loadCreateRatelane() {
  const source = fs.readFileSync(path.join(repo, 'js', 'driver.js'), 'utf8')
  // eslint-disable-next-line no-new-func
  return new Function(`${source}\nreturn createRatelane`)()
}

/**
 * A development package of the Node package (bindings-node/node_modules, installed by
 * scripts/tests.d/20-node.sh) or of the wasm package, for tests of optional integrations
 * (OpenTelemetry); null when neither has it.
 */
function devPackage(name) {
  for (const dir of ['bindings-node', 'bindings-wasm']) {
    try {
      return require(require.resolve(name, { paths: [path.join(repo, dir)] }))
    } catch (error) {
      if (error.code !== 'MODULE_NOT_FOUND') throw error
    }
  }
  return null
}

const native = loadCore()
const createRatelane = loadCreateRatelane()

// As the Node entries build it: with diagnostics_channel (write reports).
const ratelane = createRatelane(native, { diagnosticsChannel: require('node:diagnostics_channel') })
// The core surface as a package exports it: the object API of js/driver.js (Limiter,
// SimServer, Simulation) over the core module's positional surface (`native`), and the rest of
// the core module as it is.
const core = Object.assign({}, native, { Limiter: ratelane.Limiter, SimServer: ratelane.SimServer, Simulation: ratelane.Simulation })
module.exports = { repo, corePath, core, native, createRatelane, ratelane, devPackage }
