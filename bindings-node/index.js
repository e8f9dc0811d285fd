// The npm package `ratelane`: the native core (ratelane.node, from bindings-node/src/lib.rs)
// and the shared Promise driver (driver.cjs, built from js/driver.js by build.js).
'use strict'
const native = require('./ratelane.node')
const { createRatelane } = require('./driver.cjs')

module.exports = createRatelane(native)
module.exports.createRatelane = createRatelane
