'use strict';
// Package entry, `nodejs` build: the shared Promise driver (driver.cjs, built from
// js/driver.js) over the wasm core (core.cjs). The same exports as the napi package
// `ratelane`, plus init/initSync, which have nothing to do here (the module was instantiated
// by require) and exist so code written for the `web` build runs unchanged.
const core = require('./core.cjs');
const { createRatelane } = require('./driver.cjs');

async function init() {}
function initSync() {}

module.exports = { ...createRatelane(core), createRatelane, init, initSync, default: init };
