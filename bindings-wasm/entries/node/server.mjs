// `ratelane-wasm/server`, `nodejs` build, for `import`: the objects of server.cjs.
import server from './server.cjs';

export const { GcraStore, LeakyBucketStore, FixedWindowStore, init, initSync } = server;
export default init;
