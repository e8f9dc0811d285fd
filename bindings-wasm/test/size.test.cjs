'use strict';
// The download a browser bot pays: the client module (what the package's main entry loads),
// gzipped at level 9 as a compressing server sends it, within its budget. The simulator and the
// server-side limiters are modules of their own (ratelane-wasm/sim, ratelane-wasm/server), and
// the client module must not export their classes. Figures and what each part costs:
// BENCHMARKS.md, "Module size".
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const zlib = require('node:zlib');

/** Bytes, gzip -9, of pkg/web/ratelane_wasm_bg.wasm: 177,247 B after issues 41, 42, 44 and 45's
 * driver contract (155,867 B at the split); the issue-45 bound, 120 KB, is not reached
 * (README.md, "Size"). A guard against growth nobody meant, not a target. */
const CLIENT_GZIP_BUDGET = 180_000;

const pkg = path.join(__dirname, '..', 'pkg');

test(`the client module is at most ${CLIENT_GZIP_BUDGET} bytes gzipped`, () => {
  const bytes = fs.readFileSync(path.join(pkg, 'web', 'ratelane_wasm_bg.wasm'));
  const gzipped = zlib.gzipSync(bytes, { level: 9 }).length;
  assert.ok(gzipped <= CLIENT_GZIP_BUDGET, `client module: ${bytes.length} B, gzip -9 ${gzipped} B, budget ${CLIENT_GZIP_BUDGET} B`);
});

test('each module exports its own classes only', () => {
  const exported = (name) => new Set(WebAssembly.Module.exports(new WebAssembly.Module(
    fs.readFileSync(path.join(pkg, 'web', `${name}_bg.wasm`)))).map((e) => e.name));
  const classes = {
    ratelane_wasm: ['limiter_'],
    ratelane_wasm_sim: ['simserver_', 'simulation_'],
    ratelane_wasm_server: ['serverlimit_', 'serverstore_', 'renderHeaders'],
  };
  const all = Object.values(classes).flat();
  for (const [name, own] of Object.entries(classes)) {
    const names = [...exported(name)];
    for (const prefix of all) {
      const has = names.some((n) => n.startsWith(prefix));
      assert.equal(has, own.includes(prefix), `${name}_bg.wasm ${has ? 'exports' : 'lacks'} ${prefix}*`);
    }
  }
});
