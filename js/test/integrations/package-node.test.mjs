// The napi package `ratelane` as a user installs it (its packed tarball in this folder's
// node_modules): every way of loading it runs, and TypeScript's view of it is what runs.
//
// * require() and import of the main entry and of each subpath give the same objects, and the
//   ES module entries name every export of the CommonJS ones;
// * TypeScript consumers (types/node-consumer.mts and .cts), compiled with tsc --module
//   nodenext --strict, run: an import the types accept but Node refuses fails here;
// * esbuild bundles an ES module and a CommonJS app that use it (the addon copied beside the
//   bundle, as esbuild's `copy` loader does), and the bundles run.
import test from 'node:test'
import assert from 'node:assert/strict'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { execFileSync } from 'node:child_process'
import { compileAndRun, require, tempDir } from './support.mjs'

const SUBPATHS = ['ratelane', 'ratelane/redis', 'ratelane/fetch', 'ratelane/undici', 'ratelane/discordjs', 'ratelane/octokit']

test('require and import hand out the same objects, under every name, for every entry', async () => {
  for (const name of SUBPATHS) {
    const cjs = require(name)
    const esm = await import(name)
    const names = Object.keys(cjs).filter((n) => n !== 'default').sort()
    assert.ok(names.length > 0, name)
    assert.deepEqual(Object.keys(esm).filter((n) => n !== 'default').sort(), names, `${name}: the ES module names`)
    for (const n of names) assert.equal(esm[n], cjs[n], `${name}: ${n}`)
    assert.equal(esm.default, cjs, `${name}: the default export is the CommonJS module`)
  }
  const main = require('ratelane')
  for (const n of ['RateLimiter', 'ratelaneFetch', 'MaxWaitExceededError', 'GcraStore', 'createRatelane']) {
    assert.equal(typeof main[n], 'function', n)
  }
})

test('a named import of the main entry runs as an ES module file (the issue\'s SyntaxError)', (t) => {
  const dir = tempDir(t)
  const file = path.join(dir, 'app.mjs')
  fs.writeFileSync(file, `import { RateLimiter } from 'ratelane'
const limiter = new RateLimiter({ maxWait: 1000 })
const res = await limiter.run('GET', '/users/@me', () => ({ status: 204, headers: {} }))
await limiter.close()
console.log('status', res.status)
`)
  assert.equal(execFileSync(process.execPath, [file], { encoding: 'utf8' }).trim(), 'status 204')
})

test('TypeScript: tsc --module nodenext --strict accepts the ES module and CommonJS consumers, and their output runs', (t) => {
  const out = compileAndRun(t, ['node-consumer.mts', 'node-consumer.cts'])
  assert.deepEqual(out.map((o) => o.form), ['esm', 'cjs'])
})

test('TypeScript: the README one-liners type-check against the libraries\' own types, and run', (t) => {
  const [out] = compileAndRun(t, ['libraries-consumer.mts'], { types: ['node'], skipLibCheck: true })
  assert.deepEqual(out, { form: 'libraries', checks: { made: true } })
})

test('esbuild bundles an ES module and a CommonJS app for Node; the bundles run', async (t) => {
  const esbuild = require('esbuild')
  const dir = tempDir(t)
  const body = `const limiter = new RateLimiter({ maxWait: 1000 })
  const res = await limiter.run('GET', '/users/@me', () => ({ status: 200, headers: {} }))
  await limiter.close()
  console.log('bundled', res.status, typeof ratelaneFetch)`
  fs.writeFileSync(path.join(dir, 'esm.mjs'), `import { RateLimiter, ratelaneFetch } from 'ratelane'\n${body}\n`)
  fs.writeFileSync(path.join(dir, 'cjs.cjs'),
    `const { RateLimiter, ratelaneFetch } = require('ratelane')\n;(async () => {\n${body}\n})()\n`)
  for (const [entry, format, out] of [['esm.mjs', 'esm', 'esm/app.mjs'], ['cjs.cjs', 'cjs', 'cjs/app.cjs']]) {
    await esbuild.build({
      entryPoints: [path.join(dir, entry)],
      outfile: path.join(dir, 'dist', out),
      bundle: true,
      platform: 'node',
      format,
      loader: { '.node': 'copy' },
      logLevel: 'error',
      // An ES module bundle gets `require` for the addon (esbuild's documented banner).
      banner: format === 'esm' ? { js: "import { createRequire } from 'node:module'; const require = createRequire(import.meta.url);" } : {},
    })
    const bundle = fs.readFileSync(path.join(dir, 'dist', out), 'utf8')
    assert.ok(bundle.includes('createRatelane'), `${format}: the driver is in the bundle`)
    // Run from a folder with no node_modules above it: the bundle needs nothing but itself
    // and the copied addon.
    const alone = fs.mkdtempSync(path.join(os.tmpdir(), 'ratelane-bundle-'))
    t.after(() => fs.rmSync(alone, { recursive: true, force: true }))
    fs.cpSync(path.join(dir, 'dist', path.dirname(out)), alone, { recursive: true })
    const printed = execFileSync(process.execPath, [path.join(alone, path.basename(out))], { encoding: 'utf8', cwd: alone }).trim()
    assert.equal(printed, 'bundled 200 function', format)
  }
})
