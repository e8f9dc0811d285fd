// The core module of js/CONTRACT.md for this package, as the wasm package's core.cjs is for
// its own: the native addon (ratelane.node, from src/lib.rs) with the server-side stores
// written over its `ServerLimit` and `ServerStore` by the shared js/server_objects.js
// (server_objects.cjs, written by build.js). The addon evaluates no JavaScript itself.
'use strict'
const native = require('./ratelane.node')
const { createServerObjects } = require('./server_objects.cjs')

const objects = createServerObjects(native)

module.exports = {
  ...native,
  GcraStore: objects.GcraStore,
  LeakyBucketStore: objects.LeakyBucketStore,
  FixedWindowStore: objects.FixedWindowStore,
  // For redis_limiters.js: the Redis scripts' decisions take the same shape.
  serverObjects: objects,
}
