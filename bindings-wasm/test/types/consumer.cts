// Type-checked by test/types.test.cjs: the package through require() (the node build's CommonJS types).
import ratelane = require('ratelane-wasm');

export const limiter: InstanceType<typeof ratelane.RateLimiter> = new ratelane.RateLimiter({ globalLimit: 40 });
export const codes: readonly ratelane.FailCode[] = ratelane.FAIL_CODES;
export const ready: Promise<void> = ratelane.init();
