'use strict';
// The core surface of js/CONTRACT.md over the wasm module, `nodejs` build: the module is read
// and instantiated synchronously by the require below.
const wasm = require('./ratelane_wasm.js');

module.exports = {
  Limiter: wasm.Limiter,
  SimServer: wasm.SimServer,
  Simulation: wasm.Simulation,
  FAIL_CODES: Object.freeze(wasm.failCodes()),
  ERROR_CODES: Object.freeze(wasm.errorCodes()),
};
