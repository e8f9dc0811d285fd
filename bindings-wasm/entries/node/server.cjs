'use strict';
// `ratelane-wasm/server`, `nodejs` build: the server-side stores (`GcraStore`,
// `LeakyBucketStore`, `FixedWindowStore` of js/CONTRACT.md), written by the shared
// js/server_objects.js (server_objects.cjs) over the `ServerLimit` and `ServerStore` of their own
// wasm module, which holds neither the client engine nor the simulator. init/initSync have
// nothing to do here, as in index.cjs.
const wasm = require('./ratelane_wasm_server.js');
const { createServerObjects } = require('./server_objects.cjs');

const { GcraStore, LeakyBucketStore, FixedWindowStore } = createServerObjects(wasm);

async function init() {}
function initSync() {}

module.exports = { GcraStore, LeakyBucketStore, FixedWindowStore, init, initSync, default: init };
