// The core surface of js/CONTRACT.md over the wasm module, `web` build. The module must be
// instantiated before any class is constructed: `await init()` fetches ratelane_wasm_bg.wasm
// next to this file; `initSync({ module })` takes a compiled WebAssembly.Module (edge
// runtimes import .wasm files as such) or the module's bytes. Both are harmless when repeated.
// The server-side stores are written over its `ServerLimit` and `ServerStore` by the shared
// js/server_objects.js.
import initWasm, {
  initSync as initWasmSync,
  Limiter as WasmLimiter,
  SimServer as WasmSimServer,
  Simulation as WasmSimulation,
  ServerLimit as WasmServerLimit,
  ServerStore as WasmServerStore,
  failCodes,
  errorCodes,
  renderHeaders,
  readLlmRequest as wasmReadLlmRequest,
} from './ratelane_wasm.js';
import { FAIL_CODES, ERROR_CODES } from './codes.js';
import { createServerObjects } from './server_objects.mjs';

export { FAIL_CODES, ERROR_CODES };

let ready = false;

function requireInit() {
  if (!ready) throw new Error('ratelane-wasm: call init() or initSync() before using the package');
}

// The generated classes, with a clear error when used before init() (instead of a TypeError
// from inside the glue).
export class Limiter extends WasmLimiter {
  constructor(...args) {
    requireInit();
    super(...args);
  }
}
export class SimServer extends WasmSimServer {
  constructor(...args) {
    requireInit();
    super(...args);
  }
}
export class Simulation extends WasmSimulation {
  constructor(...args) {
    requireInit();
    super(...args);
  }
}
/** The model and estimated tokens of an LLM request body (needs init() first). */
export function readLlmRequest(body) {
  requireInit();
  return wasmReadLlmRequest(body);
}
// The stores reach the module only through these two: each construction checks init() first
// (a decision, whose methods call renderHeaders, only comes from a store).
const guarded = (Class) => new Proxy(Class, {
  construct(target, args, newTarget) {
    requireInit();
    return Reflect.construct(target, args, newTarget);
  },
});
const { GcraStore, LeakyBucketStore, FixedWindowStore } = createServerObjects({
  ServerLimit: guarded(WasmServerLimit),
  ServerStore: guarded(WasmServerStore),
  renderHeaders,
});
export { GcraStore, LeakyBucketStore, FixedWindowStore };

const sameList = (a, b) => a.length === b.length && a.every((x, i) => x === b[i]);

// codes.js is written from the module at build time, so the driver can check its error
// classes before init(); a mismatch means files of two builds were mixed.
function finishInit() {
  if (!sameList(failCodes(), FAIL_CODES) || !sameList(errorCodes(), ERROR_CODES)) {
    throw new Error('ratelane-wasm: codes.js does not match ratelane_wasm_bg.wasm; rebuild the package');
  }
  ready = true;
}

const isPlainObject = (v) => v !== null && typeof v === 'object' && Object.getPrototypeOf(v) === Object.prototype;

/**
 * Instantiates the module. `input`: a URL, a `Response`, a `WebAssembly.Module` or the bytes
 * (or wasm-bindgen's `{ module_or_path }`); omitted, ratelane_wasm_bg.wasm is fetched
 * relative to this file.
 */
export async function init(input) {
  await initWasm(input === undefined || isPlainObject(input) ? input : { module_or_path: input });
  finishInit();
}

/** Instantiates the module synchronously from a `WebAssembly.Module` or its bytes. */
export function initSync(module) {
  initWasmSync(isPlainObject(module) ? module : { module });
  finishInit();
}
