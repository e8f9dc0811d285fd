'use strict';
// What each part of a wasm module costs in the download (BENCHMARKS.md, "Module size"):
//
//   node bindings-wasm/bench/module_size.cjs <wasm-bindgen output .wasm> [crates|exports]
//
// The input is a module as wasm-bindgen writes it, before wasm-opt (build.sh optimises a copy;
// run wasm-bindgen yourself on target/wasm32-unknown-unknown/wasm-release/ratelane_wasm.wasm
// after `cargo build -p ratelane-wasm --target wasm32-unknown-unknown --profile wasm-release
// --no-default-features --features client`). It is optimised as build.sh does
// (`wasm-opt --no-inline=* -Oz`), then:
//   crates   code bytes by the crate of the function they ended in (the `ratelane` crates by
//            module), from the name section kept with -g: LLVM inlines across crates, so a
//            method's body may count under the wasm-bindgen wrapper that calls it;
//   exports  for each export, what the module's gzip -9 size loses without it (wasm-opt
//            removes the code only that export reached).
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const zlib = require('node:zlib');
const { execFileSync } = require('node:child_process');

const wasmOpt = path.join(__dirname, '..', 'node_modules', '.bin', 'wasm-opt');
const FLAGS = ['--no-inline=*', '-Oz'];
const STRIP = ['--strip-debug', '--strip-producers'];
const [input, mode = 'crates'] = process.argv.slice(2);
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'module-size-'));

/** The module's sections as [id, start, end] of their contents, and a LEB128 reader. */
function sections(buf) {
  const out = [];
  let p = 8;
  const leb = () => {
    let r = 0;
    let s = 0;
    let b;
    do { b = buf[p++]; r += (b & 0x7f) * 2 ** s; s += 7; } while (b & 0x80);
    return r;
  };
  while (p < buf.length) {
    const id = buf[p++];
    const size = leb();
    out.push({ id, start: p, end: p + size, at: (q) => { p = q; }, leb, pos: () => p });
    p += size;
  }
  return out;
}

function optimise(file, extra = []) {
  const out = path.join(tmp, `opt-${path.basename(file)}`);
  execFileSync(wasmOpt, [...FLAGS, ...extra, file, '-o', out]);
  return fs.readFileSync(out);
}

const gzip = (bytes) => zlib.gzipSync(bytes, { level: 9 }).length;

/** Code bytes per function name (name section), grouped by crate. */
function crates() {
  const buf = optimise(input, ['-g']);
  let imports = 0;
  const bodies = [];
  const names = new Map();
  for (const s of sections(buf)) {
    s.at(s.start);
    if (s.id === 2) {
      for (let i = 0, n = s.leb(); i < n; i++) {
        s.at(s.pos() + s.leb());
        s.at(s.pos() + s.leb());
        const kind = buf[s.pos()];
        s.at(s.pos() + 1);
        if (kind === 0) { imports++; s.leb(); }
        else if (kind === 1) { s.at(s.pos() + 1); if (buf[s.pos()] & 1) { s.at(s.pos() + 1); s.leb(); s.leb(); } else { s.at(s.pos() + 1); s.leb(); } }
        else if (kind === 2) { if (buf[s.pos()] & 1) { s.at(s.pos() + 1); s.leb(); s.leb(); } else { s.at(s.pos() + 1); s.leb(); } }
        else s.at(s.pos() + 2);
      }
    } else if (s.id === 10) {
      for (let i = 0, n = s.leb(); i < n; i++) { const size = s.leb(); bodies.push(size); s.at(s.pos() + size); }
    } else if (s.id === 0) {
      const len = s.leb();
      if (buf.toString('utf8', s.pos(), s.pos() + len) !== 'name') continue;
      s.at(s.pos() + len);
      while (s.pos() < s.end) {
        const sub = buf[s.pos()];
        s.at(s.pos() + 1);
        const subEnd = s.leb() + s.pos();
        if (sub === 1) {
          for (let i = 0, n = s.leb(); i < n; i++) {
            const index = s.leb();
            const l = s.leb();
            names.set(index, buf.toString('utf8', s.pos(), s.pos() + l));
            s.at(s.pos() + l);
          }
        }
        s.at(subEnd);
      }
    }
  }
  const by = new Map();
  let total = 0;
  bodies.forEach((size, i) => {
    const name = names.get(i + imports) || '';
    const m = name.match(/([a-z_][a-z0-9_]*)(?:\[[0-9a-f]+\])?::([A-Za-z_][A-Za-z0-9_]*)/);
    const key = !m ? '(glue and shims)' : m[1].startsWith('ratelane') ? `${m[1]}::${m[2]}` : m[1];
    by.set(key, (by.get(key) || 0) + size);
    total += size;
  });
  console.log(`code ${total} B in ${bodies.length} functions`);
  for (const [key, size] of [...by].sort((a, b) => b[1] - a[1]).slice(0, 30)) {
    console.log(`${String(size).padStart(8)} ${(100 * size / total).toFixed(1).padStart(5)} %  ${key}`);
  }
}

/** The module without the exports `drop` matches, written to a file. */
function without(drop) {
  const buf = fs.readFileSync(input);
  const parts = [buf.subarray(0, 8)];
  const enc = (n) => { const o = []; do { let b = n & 0x7f; n = Math.floor(n / 128); if (n) b |= 0x80; o.push(b); } while (n); return Buffer.from(o); };
  for (const s of sections(buf)) {
    if (s.id !== 7) { parts.push(Buffer.from([s.id]), enc(s.end - s.start), buf.subarray(s.start, s.end)); continue; }
    s.at(s.start);
    const keep = [];
    for (let i = 0, n = s.leb(); i < n; i++) {
      const from = s.pos();
      const l = s.leb();
      const name = buf.toString('utf8', s.pos(), s.pos() + l);
      s.at(s.pos() + l + 1);
      s.leb();
      if (!drop(name)) keep.push(buf.subarray(from, s.pos()));
    }
    const body = Buffer.concat([enc(keep.length), ...keep]);
    parts.push(Buffer.from([7]), enc(body.length), body);
  }
  const out = path.join(tmp, 'without.wasm');
  fs.writeFileSync(out, Buffer.concat(parts));
  return out;
}

function exports() {
  const all = gzip(optimise(input, STRIP));
  console.log(`gzip -9 after wasm-opt ${[...FLAGS, ...STRIP].join(' ')}: ${all} B (as build.sh writes it)`);
  const names = WebAssembly.Module.exports(new WebAssembly.Module(fs.readFileSync(input))).map((e) => e.name)
    .filter((n) => !n.startsWith('__'));
  for (const name of names) {
    const size = gzip(optimise(without((n) => n === name), STRIP));
    console.log(`${String(all - size).padStart(7)} B  ${name}`);
  }
}

try {
  ({ crates, exports })[mode]();
} finally {
  fs.rmSync(tmp, { recursive: true, force: true });
}
