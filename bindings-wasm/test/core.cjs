'use strict';
// The core object the shared tests of js/test/ run on (RATELANE_CORE, scripts/tests.d/30-wasm.sh):
// the package's three wasm modules as the napi core exports them in one. The client module's
// Limiter (every tests/vectors/client_*.json replays on it), the simulator module's SimServer
// and Simulation (the positional classes, as bindings-node/core.cjs has them), and the server
// module's stores.
const client = require('../pkg/node/core.cjs');
const sim = require('../pkg/node/ratelane_wasm_sim.js');
const server = require('../pkg/node/server.cjs');

module.exports = {
  ...client,
  SimServer: sim.SimServer,
  Simulation: sim.Simulation,
  GcraStore: server.GcraStore,
  LeakyBucketStore: server.LeakyBucketStore,
  FixedWindowStore: server.FixedWindowStore,
};
