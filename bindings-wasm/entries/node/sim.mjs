// `ratelane-wasm/sim`, `nodejs` build, for `import`: the objects of sim.cjs.
import sim from './sim.cjs';

export const { SimServer, Simulation, init, initSync } = sim;
export default init;
