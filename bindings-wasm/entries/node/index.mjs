// Package entry, `nodejs` build, for `import` (the same objects as require()).
import api from './index.cjs';

export const { Limiter, SimServer, Simulation, FAIL_CODES, ERROR_CODES, init, initSync } = api;
export default init;
