// The core surface of js/CONTRACT.md over the wasm client module, `bundler` build: the bundler
// instantiates the .wasm when this module is imported, so init() has nothing left to do. The
// simulator and the server-side stores are in modules of their own (`ratelane-wasm/sim`,
// `ratelane-wasm/server`: the web build's, with their own init()).
import { Limiter, failCodes, errorCodes, readLlmRequest } from './ratelane_wasm.js';

export { Limiter, readLlmRequest };
export const FAIL_CODES = Object.freeze(failCodes());
export const ERROR_CODES = Object.freeze(errorCodes());

/** Nothing to do: kept so code written for the `web` build runs unchanged. */
export async function init() {}
/** Nothing to do: kept so code written for the `web` build runs unchanged. */
export function initSync() {}
