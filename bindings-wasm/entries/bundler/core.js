// The core surface of js/CONTRACT.md over the wasm module, `bundler` build: the bundler
// instantiates the .wasm when this module is imported, so init() has nothing left to do. The
// server-side stores are written over its `ServerLimit` and `ServerStore` by the shared
// js/server_objects.js.
import {
  Limiter, SimServer, Simulation, ServerLimit, ServerStore, failCodes, errorCodes, renderHeaders, readLlmRequest,
} from './ratelane_wasm.js';
import { createServerObjects } from './server_objects.mjs';

const { GcraStore, LeakyBucketStore, FixedWindowStore } = createServerObjects({ ServerLimit, ServerStore, renderHeaders });

export { Limiter, SimServer, Simulation, GcraStore, LeakyBucketStore, FixedWindowStore, readLlmRequest };
export const FAIL_CODES = Object.freeze(failCodes());
export const ERROR_CODES = Object.freeze(errorCodes());

/** Nothing to do: kept so code written for the `web` build runs unchanged. */
export async function init() {}
/** Nothing to do: kept so code written for the `web` build runs unchanged. */
export function initSync() {}
