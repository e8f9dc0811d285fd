'use strict';
// The core surface of js/CONTRACT.md over the wasm module, `nodejs` build: the module is read
// and instantiated synchronously by the require below. The server-side stores are written over
// its `ServerLimit` and `ServerStore` by the shared js/server_objects.js (server_objects.cjs,
// written by build.sh), as the napi package's are over its addon.
const wasm = require('./ratelane_wasm.js');
const { createServerObjects } = require('./server_objects.cjs');

const objects = createServerObjects(wasm);

module.exports = {
  Limiter: wasm.Limiter,
  SimServer: wasm.SimServer,
  Simulation: wasm.Simulation,
  GcraStore: objects.GcraStore,
  LeakyBucketStore: objects.LeakyBucketStore,
  FixedWindowStore: objects.FixedWindowStore,
  FAIL_CODES: Object.freeze(wasm.failCodes()),
  ERROR_CODES: Object.freeze(wasm.errorCodes()),
  readLlmRequest: wasm.readLlmRequest,
};
