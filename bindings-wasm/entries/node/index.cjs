'use strict';
// Package entry, `nodejs` build: the shared Promise driver (driver.cjs, built from
// js/driver.js) over the wasm core (core.cjs), and the fetch adapter (adapters.cjs). The same exports as the napi package
// `ratelane`, plus init/initSync, which have nothing to do here (the module was instantiated
// by require) and exist so code written for the `web` build runs unchanged.
const core = require('./core.cjs');
const { createRatelane } = require('./driver.cjs');

async function init() {}
function initSync() {}

// diagnostics_channel (this build runs only on Node): the driver learns from undici's events
// when fetch wrote a request.
const host = { diagnosticsChannel: require('node:diagnostics_channel') };

const ratelane = createRatelane(core, host);
// The fetch adapter (js/adapters/fetch.js): ratelaneFetch.
const adapters = require('./adapters.cjs');
Object.assign(ratelane, adapters.createFetchAdapter(ratelane, adapters.createAdapterCommon(ratelane)));

module.exports = { ...ratelane, createRatelane, init, initSync, default: init };
