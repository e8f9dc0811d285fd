// `ratelane-wasm/server`, `web` build: the server-side stores (`GcraStore`, `LeakyBucketStore`,
// `FixedWindowStore` of js/CONTRACT.md), written by the shared js/server_objects.js over the
// `ServerLimit` and `ServerStore` of their own wasm module, which holds neither the client engine
// nor the simulator. `await init()` fetches ratelane_wasm_server_bg.wasm next to this file (or
// `initSync(module)`), apart from the main entry's init().
import initWasm, {
  initSync as initWasmSync,
  ServerLimit,
  ServerStore,
  renderHeaders,
} from './ratelane_wasm_server.js';
import { createServerObjects } from './server_objects.mjs';
import { instantiation } from './instantiate.js';

const instance = instantiation('ratelane-wasm/server', initWasm, initWasmSync);

// The stores reach the module only through these two: each construction checks init() first
// (a decision, whose methods call renderHeaders, only comes from a store).
export const { GcraStore, LeakyBucketStore, FixedWindowStore } = createServerObjects({
  ServerLimit: instance.guarded(ServerLimit),
  ServerStore: instance.guarded(ServerStore),
  renderHeaders,
});

export const { init, initSync } = instance;
export default init;
