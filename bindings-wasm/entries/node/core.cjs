'use strict';
// The core surface of js/CONTRACT.md over the wasm module, `nodejs` build: the module is read
// and instantiated synchronously by the require below. The server-side answers take their shape
// from the shared js/server_objects.js (server_objects.cjs, written by build.sh).
const wasm = require('./ratelane_wasm.js');
const { createServerObjects } = require('./server_objects.cjs');

wasm.installServerObjects(createServerObjects({
  xRateLimitHeaders: wasm.renderXRateLimitHeaders,
  ietfHeaders: wasm.renderIetfHeaders,
}));

module.exports = {
  Limiter: wasm.Limiter,
  SimServer: wasm.SimServer,
  Simulation: wasm.Simulation,
  GcraStore: wasm.GcraStore,
  LeakyBucketStore: wasm.LeakyBucketStore,
  FixedWindowStore: wasm.FixedWindowStore,
  FAIL_CODES: Object.freeze(wasm.failCodes()),
  ERROR_CODES: Object.freeze(wasm.errorCodes()),
};
