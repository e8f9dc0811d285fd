// The instantiation each of the web build's modules needs (core.js: the client; sim.js, the
// simulator; server.js, the server-side limiters): `init()` / `initSync()` of one module, and
// classes that throw a clear error when constructed before (instead of a TypeError from inside
// the glue). Both are harmless when repeated.

import { FAIL_CODES, ERROR_CODES } from './codes.js';

const isPlainObject = (v) => v !== null && typeof v === 'object' && Object.getPrototypeOf(v) === Object.prototype;

/**
 * `what` names the entry in the error; `initWasm` and `initWasmSync` are the module's glue;
 * `check` runs once the module is instantiated, before anything is constructed.
 */
export function instantiation(what, initWasm, initWasmSync, check = () => {}) {
  let ready = false;
  const finish = () => {
    check();
    ready = true;
  };
  const requireInit = () => {
    if (!ready) throw new Error(`${what}: call init() or initSync() before using the package`);
  };
  return {
    requireInit,
    /** `Class` whose construction checks init() first. */
    guarded: (Class) => new Proxy(Class, {
      construct(target, args, newTarget) {
        requireInit();
        return Reflect.construct(target, args, newTarget);
      },
    }),
    /**
     * Instantiates the module. `input`: a URL, a `Response`, a `WebAssembly.Module` or the bytes
     * (or wasm-bindgen's `{ module_or_path }`); omitted, the module's .wasm is fetched relative
     * to its JavaScript.
     */
    async init(input) {
      await initWasm(input === undefined || isPlainObject(input) ? input : { module_or_path: input });
      finish();
    },
    /** Instantiates the module synchronously from a `WebAssembly.Module` or its bytes. */
    initSync(module) {
      initWasmSync(isPlainObject(module) ? module : { module });
      finish();
    },
  };
}

const sameList = (a, b) => a.length === b.length && a.every((x, i) => x === b[i]);

/**
 * A `check` for instantiation(): codes.js is written from the client module at build time, so
 * the driver can check its error classes before init(); the code lists of the module `file`
 * (its `failCodes`, `errorCodes`) must match it, or files of two builds were mixed.
 */
export function sameCodes(what, file, failCodes, errorCodes) {
  return () => {
    if (!sameList(failCodes(), FAIL_CODES) || !sameList(errorCodes(), ERROR_CODES)) {
      throw new Error(`${what}: codes.js does not match ${file}; rebuild the package`);
    }
  };
}
