// Type-checked by test/types.test.cjs: the package through require() (the node build's CommonJS types).
import ratelane = require('ratelane-wasm');

export const limiter: InstanceType<typeof ratelane.RateLimiter> = new ratelane.RateLimiter({ globalLimit: 40 });
export const codes: readonly ratelane.FailCode[] = ratelane.FAIL_CODES;
export const ready: Promise<void> = ratelane.init();
import sim = require('ratelane-wasm/sim');
import server = require('ratelane-wasm/server');

export const count429: number = new sim.SimServer().count429();
export const allowed: boolean = server.GcraStore.perWindow(10, 60e9).check('k', 0).allowed;
