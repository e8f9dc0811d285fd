// The core surface of js/CONTRACT.md over the wasm module, `bundler` build: the bundler
// instantiates the .wasm when this module is imported, so init() has nothing left to do.
import { Limiter, SimServer, Simulation, failCodes, errorCodes } from './ratelane_wasm.js';

export { Limiter, SimServer, Simulation };
export const FAIL_CODES = Object.freeze(failCodes());
export const ERROR_CODES = Object.freeze(errorCodes());

/** Nothing to do: kept so code written for the `web` build runs unchanged. */
export async function init() {}
/** Nothing to do: kept so code written for the `web` build runs unchanged. */
export function initSync() {}
