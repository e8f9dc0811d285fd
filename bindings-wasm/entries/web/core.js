// The core surface of js/CONTRACT.md over the wasm client module, `web` build. The module must be
// instantiated before any class is constructed: `await init()` fetches ratelane_wasm_bg.wasm
// next to this file; `initSync({ module })` takes a compiled WebAssembly.Module (edge
// runtimes import .wasm files as such) or the module's bytes. The simulator and the server-side
// stores are in modules of their own (sim.js, server.js: `ratelane-wasm/sim`,
// `ratelane-wasm/server`), so this one carries only the client engine.
import initWasm, {
  initSync as initWasmSync,
  Limiter as WasmLimiter,
  failCodes,
  errorCodes,
  profiles,
  settings,
  bodyLimits,
  readLlmRequest as wasmReadLlmRequest,
} from './ratelane_wasm.js';
import { FAIL_CODES, ERROR_CODES, PROFILES, SETTINGS, BODY_LIMITS } from './codes.js';
import { instantiation, sameCodes, sameTables } from './instantiate.js';

export { FAIL_CODES, ERROR_CODES, PROFILES, SETTINGS, BODY_LIMITS };

const codesMatch = sameCodes('ratelane-wasm', 'ratelane_wasm_bg.wasm', failCodes, errorCodes);
const tablesMatch = sameTables('ratelane-wasm', 'ratelane_wasm_bg.wasm', { PROFILES: profiles, SETTINGS: settings, BODY_LIMITS: bodyLimits });
const instance = instantiation('ratelane-wasm', initWasm, initWasmSync, () => { codesMatch(); tablesMatch(); });

// The generated class, with a clear error when used before init().
export class Limiter extends WasmLimiter {
  constructor(...args) {
    instance.requireInit();
    super(...args);
  }
}

/** The model and estimated tokens of an LLM request body (needs init() first). */
export function readLlmRequest(body) {
  instance.requireInit();
  return wasmReadLlmRequest(body);
}

export const { init, initSync } = instance;
