'use strict';
// `ratelane-wasm/sim`, `nodejs` build: the Discord simulator (`SimServer`, `Simulation` of
// js/CONTRACT.md) from its own wasm module, which holds the engine too (a Simulation runs a
// limiter inside it). The object API is the shared driver's (driver.cjs) over the module's
// positional classes. init/initSync have nothing to do here, as in index.cjs.
const wasm = require('./ratelane_wasm_sim.js');
const { createRatelane } = require('./driver.cjs');

const { SimServer, Simulation } = createRatelane({
  SimServer: wasm.SimServer,
  Simulation: wasm.Simulation,
  FAIL_CODES: Object.freeze(wasm.failCodes()),
  ERROR_CODES: Object.freeze(wasm.errorCodes()),
});

async function init() {}
function initSync() {}

module.exports = { SimServer, Simulation, init, initSync, default: init };
