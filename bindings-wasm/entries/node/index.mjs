// Package entry, `nodejs` build, for `import`: the objects of index.cjs. build.sh fills in the
// names (every export of createRatelane).
import ratelane from './index.cjs';

export const { __RATELANE_EXPORTS__ } = ratelane;
export const { createRatelane, init, initSync } = ratelane;
export default init;
