// The wasm package `ratelane-wasm` as a user installs it (its packed tarball in this folder's
// node_modules; RATELANE_PACKAGE=ratelane-wasm): TypeScript's view of it is what runs, and
// bundlers can take it.
//
// * TypeScript consumers (types/wasm-consumer.mts and .cts), compiled with tsc --module
//   nodenext --strict, run;
// * esbuild bundles an app for browsers and edge runtimes (the `web` build, chosen by the
//   export conditions); the bundle runs, initialised from the module's bytes as an edge runtime
//   does (initSync), with ratelaneFetch over a fake fetch. (On Node the package is used as
//   installed: its nodejs build reads the .wasm beside its JavaScript.)
import test from 'node:test'
import assert from 'node:assert/strict'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { execFileSync } from 'node:child_process'
import { compileAndRun, require, tempDir } from './support.mjs'

test('TypeScript: tsc --module nodenext --strict accepts the consumers of ratelane-wasm, and their output runs', (t) => {
  const out = compileAndRun(t, ['wasm-consumer.mts', 'wasm-consumer.cts'])
  assert.deepEqual(out.map((o) => o.form), ['esm', 'cjs'])
})

test('esbuild: a browser or edge bundle takes the web build, and runs initialised from the module\'s bytes', async (t) => {
  const esbuild = require('esbuild')
  const dir = tempDir(t)
  fs.writeFileSync(path.join(dir, 'edge.mjs'), `import { initSync, RateLimiter, ratelaneFetch } from 'ratelane-wasm'
export async function main(wasmBytes) {
  initSync(wasmBytes)                       // as an edge runtime does with an imported .wasm
  let sent = 0
  const fetch = ratelaneFetch({}, { fetch: async () => { sent += 1; return new Response('{}', { status: 200 }) } })
  const statuses = await Promise.all([1, 2, 3].map(() => fetch('https://discord.com/api/v10/users/@me').then((r) => r.status)))
  await fetch.limiter.close()
  return { statuses, sent, driver: typeof RateLimiter }
}
`)
  const outDir = fs.mkdtempSync(path.join(os.tmpdir(), 'ratelane-wasm-bundle-'))
  t.after(() => fs.rmSync(outDir, { recursive: true, force: true }))
  await esbuild.build({ entryPoints: [path.join(dir, 'edge.mjs')], outfile: path.join(outDir, 'edge.mjs'), bundle: true,
    platform: 'browser', format: 'esm', logLevel: 'error' })
  const bundle = fs.readFileSync(path.join(outDir, 'edge.mjs'), 'utf8')
  assert.ok(!/require\(|node:/.test(bundle), 'the browser bundle has no require and no node: import')
  const wasm = require.resolve('ratelane-wasm/ratelane_wasm_bg.wasm')
  const run = `const { main } = await import(${JSON.stringify(path.join(outDir, 'edge.mjs'))})
const bytes = (await import('node:fs')).readFileSync(${JSON.stringify(wasm)})
console.log(JSON.stringify(await main(bytes)))`
  const out = JSON.parse(execFileSync(process.execPath, ['--input-type=module', '-e', run], { encoding: 'utf8', cwd: outDir }))
  assert.deepEqual(out, { statuses: [200, 200, 200], sent: 3, driver: 'function' })
})
