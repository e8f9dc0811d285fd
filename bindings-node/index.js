// The npm package `ratelane`: the core (core.cjs: the native addon ratelane.node, from
// bindings-node/src/lib.rs, with the server-side stores of js/server_objects.js) and the shared
// Promise driver (driver.cjs, built from js/driver.js by build.js).
'use strict'
const fs = require('node:fs')
const path = require('node:path')

for (const file of ['ratelane.node', 'driver.cjs', 'server_objects.cjs']) {
  if (!fs.existsSync(path.join(__dirname, file))) {
    throw new Error(
      `ratelane: ${file} is missing: the package was not built. Run \`node build.js\` in ${__dirname} ` +
        '(it needs Rust: cargo), or allow its install script (`npm install-scripts approve ratelane`) and install again.',
    )
  }
}
const core = require('./core.cjs')
const { createRatelane } = require('./driver.cjs')

// diagnostics_channel: the driver learns from undici's events when fetch wrote a request.
module.exports = createRatelane(core, { diagnosticsChannel: require('node:diagnostics_channel') })
module.exports.createRatelane = createRatelane
