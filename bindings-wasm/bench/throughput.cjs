'use strict';
// What a request costs through the wasm package under Node (nodejs build), for BENCHMARKS.md
// ("wasm"):   node bindings-wasm/bench/throughput.cjs
// * sans-IO cycle: enqueue, drain, handleResponse (5 Discord headers), drain, over 100
//   channels with room to spare and the global limit off, so nothing waits; then the same
//   cycle through the positional surface (enqueueParts, drainPacked, respond), as is
//   (X-RateLimit-Reset never moves), with X-RateLimit-Reset moving with time as a real
//   server's, and without it;
// * RateLimiter.run with an in-process response (the shared driver plus its Promise);
// * a Simulation of 5000 messages to 50 channels, run inside the module.
// Each row is the best of 5 rounds: wall and CPU (user + system) per item.
const { Limiter, RateLimiter } = require('ratelane-wasm');
const { Simulation } = require('ratelane-wasm/sim');
// The core module itself: the positional surface the driver calls (js/CONTRACT.md).
const native = require('../pkg/node/core.cjs');

function measure(label, count, fn) {
  let best = null;
  for (let round = 0; round < 5; round++) {
    const cpu = process.cpuUsage();
    const start = process.hrtime.bigint();
    const done = fn();
    const finish = () => {
      const wall = Number(process.hrtime.bigint() - start) / 1e3 / count;
      const used = process.cpuUsage(cpu);
      const cpuPer = (used.user + used.system) / count;
      if (best === null || wall < best.wall) best = { wall, cpu: cpuPer };
    };
    if (done && typeof done.then === 'function') throw new Error('use measureAsync');
    finish();
  }
  console.log(`${label}: ${best.wall.toFixed(2)} µs wall, ${best.cpu.toFixed(2)} µs CPU per item (${count} items)`);
}

async function measureAsync(label, count, fn) {
  let best = null;
  for (let round = 0; round < 5; round++) {
    const cpu = process.cpuUsage();
    const start = process.hrtime.bigint();
    await fn();
    const wall = Number(process.hrtime.bigint() - start) / 1e3 / count;
    const used = process.cpuUsage(cpu);
    const cpuPer = (used.user + used.system) / count;
    if (best === null || wall < best.wall) best = { wall, cpu: cpuPer };
  }
  console.log(`${label}: ${best.wall.toFixed(2)} µs wall, ${best.cpu.toFixed(2)} µs CPU per item (${count} items)`);
}

const { HEADERS, LINES, positionalLives } = require('./life.cjs');

const CYCLES = 50_000;
measure('sans-IO cycle', CYCLES, () => {
  const limiter = new Limiter('{"global_limit": 0}');
  let now = 0;
  for (let i = 0; i < CYCLES; i++) {
    now += 1000;
    const channel = 100000000000000000 + (i % 100);
    const id = limiter.enqueue(now, { method: 'POST', path: `/channels/${channel}/messages` });
    limiter.drain();
    limiter.handleResponse(now + 500, id, { status: 200, headers: HEADERS });
    limiter.drain();
  }
  limiter.free();
});

/** The positional life with each answer's headers from `lines(now)`. */
function positional(lines) {
  return () => positionalLives(native, CYCLES, lines);
}
measure('sans-IO cycle, positional', CYCLES, positional(() => LINES));
// The same with the server's clock running as this process's does (X-RateLimit-Reset moves
// with the answers' time, as a real server's), where the row above holds it still, which
// makes every answer's uplink a new extreme; and without X-RateLimit-Reset at all. The lines
// are made before the loop: the rows time the engine, not the text.
const MOVING = Array.from({ length: CYCLES }, (_, i) => LINES.replace(
  '1700000005.000', (1700000005 + Math.floor(((i + 1) * 1000 + 500) / 1e6) / 1000).toFixed(3)));
const NO_RESET = HEADERS.filter(([name]) => name !== 'X-RateLimit-Reset').map(([name, value]) => `${name}\n${value}`).join('\n');
measure('sans-IO cycle, positional, X-RateLimit-Reset moving', CYCLES, positional((now) => MOVING[now / 1000 - 1]));
measure('sans-IO cycle, positional, no X-RateLimit-Reset', CYCLES, positional(() => NO_RESET));

const RUNS = 20_000;
const MESSAGES = 5000;
(async () => {
  await measureAsync('RateLimiter.run, in-process response', RUNS, async () => {
    const limiter = new RateLimiter({ globalLimit: 0 });
    const response = { status: 200, headers: HEADERS };
    for (let i = 0; i < RUNS; i++) {
      const channel = 100000000000000000 + (i % 100);
      await limiter.run('POST', `/channels/${channel}/messages`, () => response);
    }
    await limiter.close();
  });

  measure('Simulation, per message', MESSAGES, () => {
    const sim = new Simulation('{}', JSON.stringify({
      buckets: { m: { limit: 5, window_ns: 5e9 } },
      routes: { 'POST /channels/:id/messages': { bucket: 'm' } },
    }), '{"seed": 1, "uplink": {"base_ns": 20000000, "jitter_ns": 10000000}, "downlink": {"base_ns": 20000000}}');
    for (let i = 0; i < MESSAGES; i++) {
      sim.enqueueAt(i * 1e6, { method: 'POST', path: '/channels/:id/messages', major: String(i % 50) });
    }
    const report = sim.run();
    if (report.succeeded !== MESSAGES) throw new Error(`simulation: ${report.succeeded} succeeded`);
    sim.free();
  });
})();
