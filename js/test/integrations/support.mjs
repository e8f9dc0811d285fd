// What the tests of js/test/integrations/ share: the package under test, the local imitations
// of the APIs (bindings-node/test/discord-server.cjs: the core's simulator behind node:http on
// 127.0.0.1, in a Discord, GitHub, OpenAI or Anthropic dialect), temporary folders.
//
// The package under test is RATELANE_PACKAGE (`ratelane`, default, or `ratelane-wasm`),
// installed in this folder's node_modules from its packed tarball, as a user gets it
// (scripts/tests.d/20-node.sh and 30-wasm.sh unpack it there after `npm ci`).
import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { execFileSync } from 'node:child_process'
import { createRequire } from 'node:module'
import { fileURLToPath } from 'node:url'

export const here = path.dirname(fileURLToPath(import.meta.url))
export const repo = path.join(here, '..', '..', '..')
export const require = createRequire(import.meta.url)
export const packageName = process.env.RATELANE_PACKAGE || 'ratelane'
export const ratelane = await import(packageName)
if (typeof ratelane.init === 'function') await ratelane.init()

const { startDiscordServer: start } = require(path.join(repo, 'bindings-node', 'test', 'discord-server.cjs'))

/** The local imitation on 127.0.0.1 over the package under test's simulator (`SimServer`). */
export function startServer(options = {}) {
  return start({ SimServer: ratelane.SimServer, ...options })
}

/** A fresh folder inside this one (so that its files resolve this folder's node_modules). */
export function tempDir(t) {
  const dir = fs.mkdtempSync(path.join(here, '.tmp-'))
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }))
  return dir
}

/** Counts by status of the imitation's answers, e.g. { 200: 10, 429: 2 }. */
export function byStatus(server) {
  return { ...server.stats.byStatus }
}

/**
 * Compiles `files` (in ./types) with tsc --module nodenext --strict into a fresh folder and
 * runs each output; every one prints `{ form, checks }`. Returns the printed objects, in order,
 * after asserting that tsc passed and every check is true. `options`: more compiler options.
 */
export function compileAndRun(t, files, options = {}) {
  const dir = tempDir(t)
  const tsconfig = {
    compilerOptions: {
      module: 'nodenext', moduleResolution: 'nodenext', target: 'es2022', lib: ['es2022', 'dom'], types: [],
      strict: true, skipLibCheck: false, outDir: path.join(dir, 'out'), rootDir: path.join(here, 'types'),
      ...options,
    },
    files: files.map((f) => path.join(here, 'types', f)),
  }
  const config = path.join(dir, 'tsconfig.json')
  fs.writeFileSync(config, JSON.stringify(tsconfig))
  try {
    execFileSync(process.execPath, [require.resolve('typescript/bin/tsc'), '-p', config], { encoding: 'utf8' })
  } catch (error) {
    assert.fail(`tsc failed:\n${error.stdout}${error.stderr}`)
  }
  return files.map((f) => {
    const out = JSON.parse(execFileSync(process.execPath, [path.join(dir, 'out', f.replace(/\.(m|c)ts$/, '.$1js'))], { encoding: 'utf8' }))
    for (const [check, ok] of Object.entries(out.checks)) assert.ok(ok, `${f}: ${check}`)
    return out
  })
}
