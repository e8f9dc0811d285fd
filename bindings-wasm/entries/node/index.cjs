'use strict';
// Package entry, `nodejs` build: the shared Promise driver (driver.cjs, built from
// js/driver.js) over the wasm client core (core.cjs), and the fetch adapter (adapters.cjs). The
// exports of the napi package `ratelane` but the simulator's and the stores' (sim.cjs,
// server.cjs), plus init/initSync, which have nothing to do here (the module was instantiated by
// require) and exist so code written for the `web` build runs unchanged.
const core = require('./core.cjs');
const { createRatelane } = require('./driver.cjs');

async function init() {}
function initSync() {}

// diagnostics_channel (this build runs only on Node): the driver learns from undici's events
// when fetch wrote a request.
const host = { diagnosticsChannel: require('node:diagnostics_channel') };

// The driver's names for the simulator and the stores belong to `ratelane-wasm/sim` and
// `ratelane-wasm/server` (this core has neither); the ES module entries take their names from
// this object (build.sh), so they leave them out too.
const ratelane = createRatelane(core, host);
for (const name of ['SimServer', 'Simulation', 'GcraStore', 'LeakyBucketStore', 'FixedWindowStore']) delete ratelane[name];
// The fetch adapter (js/adapters/fetch.js): ratelaneFetch.
const adapters = require('./adapters.cjs');
Object.assign(ratelane, adapters.createFetchAdapter(ratelane, adapters.createAdapterCommon(ratelane)));

module.exports = { ...ratelane, createRatelane, init, initSync, default: init };
