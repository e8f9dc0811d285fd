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
  readLlmRequest as wasmReadLlmRequest,
} from './ratelane_wasm.js';
import { FAIL_CODES, ERROR_CODES } from './codes.js';
import { instantiation, sameCodes } from './instantiate.js';

export { FAIL_CODES, ERROR_CODES };

const instance = instantiation('ratelane-wasm', initWasm, initWasmSync, sameCodes('ratelane-wasm', 'ratelane_wasm_bg.wasm', failCodes, errorCodes));

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
