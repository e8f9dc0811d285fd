// The core surface of js/CONTRACT.md over the wasm module, `web` build. The module must be
// instantiated before any class is used: `await init()` fetches ratelane_wasm_bg.wasm next to
// this file; `initSync({ module })` takes a compiled WebAssembly.Module (edge runtimes that
// import .wasm files) or the module's bytes. Both are harmless when called again.
import initWasm, {
  initSync as initWasmSync,
  Limiter,
  SimServer,
  Simulation,
  failCodes,
  errorCodes,
} from './ratelane_wasm.js';
import { FAIL_CODES, ERROR_CODES } from './codes.js';

export { Limiter, SimServer, Simulation, FAIL_CODES, ERROR_CODES };

const sameList = (a, b) => a.length === b.length && a.every((x, i) => x === b[i]);

// codes.js is written from the module at build time; a mismatch means files of two builds
// were mixed, and the driver's code-to-error mapping could be wrong.
function checkCodes() {
  if (!sameList(failCodes(), FAIL_CODES) || !sameList(errorCodes(), ERROR_CODES)) {
    throw new Error('ratelane-wasm: codes.js does not match ratelane_wasm_bg.wasm; rebuild the package');
  }
}

const isPlainObject = (v) => v !== null && typeof v === 'object' && Object.getPrototypeOf(v) === Object.prototype;

/**
 * Instantiates the module. `input`: a URL, a `Response`, a `WebAssembly.Module` or the bytes;
 * omitted, ratelane_wasm_bg.wasm is fetched relative to this file.
 */
export async function init(input) {
  await initWasm(input === undefined || isPlainObject(input) ? input : { module_or_path: input });
  checkCodes();
}

/** Instantiates the module synchronously from a `WebAssembly.Module` or its bytes. */
export function initSync(module) {
  initWasmSync(isPlainObject(module) ? module : { module });
  checkCodes();
}
