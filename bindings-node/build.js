#!/usr/bin/env node
// Builds the package from source: the native addon (Rust, with cargo from crates.io) and the
// shared Promise driver (../js/driver.js). npm runs it as the `install` script, so
// `npm install ./bindings-node` (or `npm install` here) builds everything.
//
// * The addon: `napi build` when @napi-rs/cli is installed (npm install in this folder); it
//   also regenerates the typings native.d.ts from the Rust signatures. Without the CLI
//   (a user's `npm install ./bindings-node`), plain `cargo build` and a copy; native.d.ts is
//   then the committed one (the repository's tests check it is current).
// * The driver: ../js/driver.js plus one export line becomes driver.cjs; ../js/*.d.ts are
//   copied beside it. Likewise ../js/redis_store.js becomes redis_store.cjs, and the shared
//   store script ../redis/scripts/shared_store.lua is copied beside it (redis_store.js). And
//   ../js/server_objects.js becomes server_objects.cjs, loaded by core.cjs (the addon evaluates
//   no JavaScript).
// Outside the repository (an installed tarball) the prebuilt files shipped in it are used.
'use strict'
const { execFileSync } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')

const here = __dirname
const root = path.join(here, '..')
const force = process.argv.includes('--force')
const inRepo = fs.existsSync(path.join(root, 'Cargo.toml')) && fs.existsSync(path.join(root, 'js', 'driver.js'))

function log(message) {
  process.stderr.write(`ratelane build: ${message}\n`)
}

function driver() {
  const source = fs.readFileSync(path.join(root, 'js', 'driver.js'), 'utf8')
  fs.writeFileSync(path.join(here, 'driver.cjs'), `${source}\nmodule.exports = { createRatelane }\n`)
  for (const name of ['core.d.ts', 'driver.d.ts']) {
    fs.copyFileSync(path.join(root, 'js', name), path.join(here, name))
  }
  // The Redis store of shared mode (require('ratelane/redis')) and THE store script it runs.
  const store = fs.readFileSync(path.join(root, 'js', 'redis_store.js'), 'utf8')
  fs.writeFileSync(path.join(here, 'redis_store.cjs'), `${store}\nmodule.exports = { createRedisStore }\n`)
  fs.copyFileSync(path.join(root, 'redis', 'scripts', 'shared_store.lua'), path.join(here, 'shared_store.lua'))
  const objects = fs.readFileSync(path.join(root, 'js', 'server_objects.js'), 'utf8')
  fs.writeFileSync(path.join(here, 'server_objects.cjs'), `${objects}\nmodule.exports = { createServerObjects }\n`)
}

function cargo(args) {
  return execFileSync('cargo', args, { cwd: root, stdio: ['ignore', 'pipe', 'inherit'], encoding: 'utf8', maxBuffer: 64 << 20 })
}

function nativeWithCli(cli) {
  log('napi build --release (regenerates native.d.ts)')
  execFileSync(process.execPath, [cli, 'build', '--release', '--strip', '--dts', 'native.d.ts'], { cwd: here, stdio: 'inherit' })
}

function nativeWithCargo() {
  log('cargo build -p ratelane-node --release')
  const out = cargo(['build', '-p', 'ratelane-node', '--release', '--message-format=json-render-diagnostics'])
  let built = null
  for (const line of out.split('\n')) {
    if (!line.startsWith('{')) continue
    const msg = JSON.parse(line)
    if (msg.reason === 'compiler-artifact' && msg.target && msg.target.name === 'ratelane_node' && msg.target.kind.includes('cdylib')) {
      built = msg.filenames.find((f) => /\.(so|dylib|dll)$/.test(f)) || built
    }
  }
  if (!built) throw new Error('cargo did not report the ratelane-node library')
  fs.copyFileSync(built, path.join(here, 'ratelane.node'))
}

function cliPath() {
  try {
    const pkg = require.resolve('@napi-rs/cli/package.json', { paths: [here] })
    const cli = path.join(path.dirname(pkg), 'dist', 'cli.js')
    return fs.existsSync(cli) ? cli : null
  } catch (_) {
    return null
  }
}

function main() {
  const addon = path.join(here, 'ratelane.node')
  if (!inRepo) {
    const built = ['driver.cjs', 'redis_store.cjs', 'server_objects.cjs'].every((f) => fs.existsSync(path.join(here, f)))
    if (fs.existsSync(addon) && built) return // a packed, prebuilt package
    throw new Error('ratelane: no prebuilt addon here and not inside the ratelane repository; install from a clone: npm install ./bindings-node')
  }
  driver()
  if (process.env.RATELANE_SKIP_NATIVE === '1' && fs.existsSync(addon) && !force) {
    log('RATELANE_SKIP_NATIVE=1: keeping ratelane.node')
    return
  }
  try {
    execFileSync('cargo', ['--version'], { stdio: 'ignore' })
  } catch (_) {
    throw new Error('ratelane: building from source needs Rust (cargo); install it with rustup, then npm install again')
  }
  const cli = cliPath()
  if (cli) nativeWithCli(cli)
  else nativeWithCargo()
}

try {
  main()
} catch (error) {
  process.stderr.write(`${error.message}\n`)
  process.exit(1)
}
