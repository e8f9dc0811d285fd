// `ratelane-wasm/sim`, `web` build: the Discord simulator (`SimServer`, `Simulation` of
// js/CONTRACT.md) from its own wasm module, which holds the engine too (a Simulation runs a
// limiter inside it). The object API is the shared driver's (driver.mjs) over the module's
// positional classes. `await init()` fetches ratelane_wasm_sim_bg.wasm next to this file (or
// `initSync(module)`), apart from the main entry's init().
import initWasm, {
  initSync as initWasmSync,
  SimServer as WasmSimServer,
  Simulation as WasmSimulation,
  failCodes,
  errorCodes,
} from './ratelane_wasm_sim.js';
import { FAIL_CODES, ERROR_CODES } from './codes.js';
import { createRatelane } from './driver.mjs';
import { instantiation, sameCodes } from './instantiate.js';

const instance = instantiation('ratelane-wasm/sim', initWasm, initWasmSync, sameCodes('ratelane-wasm/sim', 'ratelane_wasm_sim_bg.wasm', failCodes, errorCodes));

// The driver's classes reach the module only through these two, which check init() first.
export const { SimServer, Simulation } = createRatelane({
  SimServer: instance.guarded(WasmSimServer),
  Simulation: instance.guarded(WasmSimulation),
  FAIL_CODES,
  ERROR_CODES,
});

export const { init, initSync } = instance;
export default init;
