// Package entry (ES module): the shared Promise driver (driver.mjs, built from js/driver.js)
// over the wasm core (core.js). build.sh fills in the names (every export of createRatelane).
// With the `web` build, call init() or initSync() before constructing anything.
import * as core from './core.js';
import { createRatelane } from './driver.mjs';
import { createAdapterCommon, createFetchAdapter } from './adapters.mjs';

const ratelane = createRatelane(core);
// The fetch adapter (js/adapters/fetch.js): ratelaneFetch.
Object.assign(ratelane, createFetchAdapter(ratelane, createAdapterCommon(ratelane)));
export const { __RATELANE_EXPORTS__ } = ratelane;
export { createRatelane };
export { init, initSync, init as default } from './core.js';
