'use strict';
// The core surface of js/CONTRACT.md over the wasm client module, `nodejs` build: the module is
// read and instantiated synchronously by the require below. The simulator and the server-side
// stores are in modules of their own (sim.cjs, server.cjs: `ratelane-wasm/sim`,
// `ratelane-wasm/server`), so this one carries only the client engine.
const wasm = require('./ratelane_wasm.js');

module.exports = {
  Limiter: wasm.Limiter,
  FAIL_CODES: Object.freeze(wasm.failCodes()),
  ERROR_CODES: Object.freeze(wasm.errorCodes()),
  readLlmRequest: wasm.readLlmRequest,
};
