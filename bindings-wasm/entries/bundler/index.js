// Package entry (ES module).
export { Limiter, SimServer, Simulation, FAIL_CODES, ERROR_CODES, init, initSync } from './core.js';
export { init as default } from './core.js';
