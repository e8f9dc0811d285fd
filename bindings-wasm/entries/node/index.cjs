'use strict';
// Package entry, `nodejs` build (CommonJS).
const core = require('./core.cjs');

/** Nothing to do under Node (the module is instantiated at require time); kept so code
 *  written for the `web` build runs unchanged. */
async function init() {}
function initSync() {}

module.exports = { ...core, init, initSync, default: init };
