'use strict';
// The request life both benches here time through a core's positional surface (js/CONTRACT.md):
// enqueueParts, drainPacked, respond, drainPacked over 100 channels with room to spare, the
// answers carrying Discord's five headers.

const HEADERS = [
  ['X-RateLimit-Limit', '5'], ['X-RateLimit-Remaining', '4'], ['X-RateLimit-Reset', '1700000005.000'],
  ['X-RateLimit-Reset-After', '5.000'], ['X-RateLimit-Bucket', 'abcd'],
];
const LINES = HEADERS.map(([name, value]) => `${name}\n${value}`).join('\n');

/** `cycles` lives on a new `native.Limiter`, each answer's headers `lines(now)`; returns `cycles`. */
function positionalLives(native, cycles, lines = () => LINES) {
  const limiter = new native.Limiter('{"global_limit": 0}');
  let now = 0;
  for (let i = 0; i < cycles; i++) {
    now += 1000;
    const channel = 100000000000000000 + (i % 100);
    const id = limiter.enqueueParts(now, 'POST', `/channels/${channel}/messages`);
    const sent = limiter.drainPacked();
    if (sent[0] !== 0 || sent[1] !== id) throw new Error(`unexpected ${sent}`);
    limiter.respond(now + 500, id, 200, lines(now));
    const after = limiter.drainPacked();
    if (after[after.length - 2] === 3) { limiter.takeHeld(); limiter.drainPacked(); } // bucket_learned, the first time
  }
  if (typeof limiter.free === 'function') limiter.free();
  return cycles;
}

module.exports = { HEADERS, LINES, positionalLives };
