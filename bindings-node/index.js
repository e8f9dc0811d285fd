// The npm package `ratelane`: the core (core.cjs: the native addon ratelane.node, from
// bindings-node/src/lib.rs, with the server-side stores of js/server_objects.js) and the shared
// Promise driver (driver.cjs, built from js/driver.js by build.js), and the fetch adapter
// (adapters.cjs, from js/adapters/). index.mjs (written by build.js) is the ES module entry.
'use strict'
// Each file is required by its literal name, so that a bundler (esbuild, webpack) follows it;
// one the build did not write gets a message saying how to build it.
let core, createRatelane, adapters
try {
  core = require('./core.cjs') // loads ratelane.node and server_objects.cjs
  createRatelane = require('./driver.cjs').createRatelane
  adapters = require('./adapters.cjs')
} catch (error) {
  const missing = error && error.code === 'MODULE_NOT_FOUND' &&
    /(ratelane\.node|driver\.cjs|server_objects\.cjs|adapters\.cjs)/.exec(String(error.message))
  if (!missing) throw error
  throw new Error(
    `ratelane: ${missing[1]} is missing: the package was not built. Run \`node build.js\` in ${__dirname} ` +
      '(it needs Rust: cargo), or allow its install script (`npm install-scripts approve ratelane`) and install again.',
    { cause: error },
  )
}

// diagnostics_channel: the driver learns from undici's events when fetch wrote a request.
module.exports = createRatelane(core, { diagnosticsChannel: require('node:diagnostics_channel') })
module.exports.createRatelane = createRatelane

// The adapters every runtime has (js/adapters/): ratelaneFetch. The Node-only ones are the
// subpaths ratelane/undici, ratelane/discordjs and ratelane/octokit.
const common = adapters.createAdapterCommon(module.exports)
Object.assign(module.exports, adapters.createFetchAdapter(module.exports, common))
