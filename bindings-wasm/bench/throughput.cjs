'use strict';
// Throughput of the wasm core under Node (nodejs build), for BENCHMARKS.md ("wasm"):
//   node bindings-wasm/bench/throughput.cjs
// * driver loop: one request's full cycle across the JS/wasm boundary (enqueue, drain,
//   handleResponse with Discord headers, drain), over 100 channels;
// * simulation: a Simulation of 5000 messages to 50 channels run inside the module.
// Prints the best of 5 rounds of each.
const { Limiter, Simulation } = require('../pkg/node/core.cjs');

function best(label, unit, count, fn) {
  let bestMs = Infinity;
  for (let round = 0; round < 5; round++) {
    const start = process.hrtime.bigint();
    fn();
    const ms = Number(process.hrtime.bigint() - start) / 1e6;
    bestMs = Math.min(bestMs, ms);
  }
  const rate = (count / bestMs) * 1000;
  console.log(`${label}: ${bestMs.toFixed(1)} ms for ${count} ${unit} (${Math.round(rate).toLocaleString('en')} ${unit}/s)`);
}

const CYCLES = 50_000;
best('driver loop', 'requests', CYCLES, () => {
  const limiter = new Limiter('{"global_limit": 0}');
  let now = 0;
  for (let i = 0; i < CYCLES; i++) {
    now += 1000;
    const channel = 100000000000000000 + (i % 100);
    const id = limiter.enqueue(now, { method: 'POST', path: `/channels/${channel}/messages` });
    limiter.drain();
    limiter.handleResponse(now + 500, id, {
      status: 200,
      headers: [
        ['X-RateLimit-Limit', '5'], ['X-RateLimit-Remaining', '4'],
        ['X-RateLimit-Reset-After', '5.000'], ['X-RateLimit-Bucket', 'abcd'],
      ],
    });
    limiter.drain();
  }
  limiter.free();
});

const MESSAGES = 5000;
best('simulation', 'messages', MESSAGES, () => {
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
