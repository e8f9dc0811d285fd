'use strict';
// The Node package's two possible cores side by side, in one process, for the decision record
// docs/decisions/0001-node-keeps-native-core.md:
//   node bindings-wasm/bench/native_vs_wasm.cjs
// Needs both packages built (bindings-node: `node build.js`; bindings-wasm: `bash build.sh`),
// as scripts/tests.d/20-node.sh and 30-wasm.sh leave them.
// For each core: the sans-IO cycle through the positional surface the driver uses
// (enqueueParts, drainPacked, respond, drainPacked) over 100 channels with room to spare, and
// RateLimiter.run with an in-process response (the shared driver and its Promise). The rounds
// alternate napi, wasm, napi, wasm, ... so that a change in the machine's load hits both; each
// row is the best round, wall and CPU (user + system) per item.
const path = require('node:path');

const repo = path.join(__dirname, '..', '..');
const CORES = [
  { name: 'napi', pkg: require(path.join(repo, 'bindings-node')), native: require(path.join(repo, 'bindings-node', 'core.cjs')) },
  { name: 'wasm', pkg: require(path.join(repo, 'bindings-wasm', 'pkg', 'node', 'index.cjs')), native: require(path.join(repo, 'bindings-wasm', 'pkg', 'node', 'core.cjs')) },
];

const { HEADERS, positionalLives } = require('./life.cjs');
const CYCLES = 50_000;
const RUNS = 20_000;
const ROUNDS = Number(process.env.ROUNDS || 5);

function positional(native) {
  return positionalLives(native, CYCLES);
}

async function driver(pkg) {
  const limiter = new pkg.RateLimiter({ globalLimit: 0 });
  const response = { status: 200, headers: HEADERS };
  for (let i = 0; i < RUNS; i++) {
    const channel = 100000000000000000 + (i % 100);
    await limiter.run('POST', `/channels/${channel}/messages`, () => response);
  }
  await limiter.close();
  return RUNS;
}

async function timed(fn) {
  const cpu = process.cpuUsage();
  const start = process.hrtime.bigint();
  const count = await fn();
  const wall = Number(process.hrtime.bigint() - start) / 1e3 / count;
  const used = process.cpuUsage(cpu);
  return { wall, cpu: (used.user + used.system) / count };
}

(async () => {
  const rows = [
    ['sans-IO cycle, positional', (core) => positional(core.native)],
    ['RateLimiter.run, in-process response', (core) => driver(core.pkg)],
  ];
  for (const [label, fn] of rows) {
    const best = new Map();
    for (let round = 0; round < ROUNDS; round++) {
      for (const core of CORES) {
        const t = await timed(() => fn(core));
        const b = best.get(core.name);
        if (!b || t.wall < b.wall) best.set(core.name, t);
      }
    }
    for (const core of CORES) {
      const t = best.get(core.name);
      console.log(`${label}, ${core.name}: ${t.wall.toFixed(2)} µs wall, ${t.cpu.toFixed(2)} µs CPU per item`);
    }
  }
})();
