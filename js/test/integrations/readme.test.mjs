// The JavaScript snippets of the READMEs run as pasted: every ```js block of
// bindings-node/README.md and bindings-wasm/README.md, and of the Node and "Browser and edge"
// sections of README.md, is written to a file of its own (an ES module, in this folder so that
// its imports resolve like an application's) and run with node; it must exit 0. The hosts they
// call (discord.com, api.openai.com, api.anthropic.com, api.github.com) are local imitations
// (readme-preload.mjs). A snippet that imports the other package (ratelane-wasm when the
// package under test is ratelane, and the reverse) is left to that package's run; one that
// needs Redis (REDIS_URL) runs when RATELANE_REDIS_URL is set.
import test from 'node:test'
import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { spawnSync } from 'node:child_process'
import { here, repo, packageName, tempDir } from './support.mjs'

/** Where the snippets are: a file, and optionally the `## ` sections of it that are checked. */
const SOURCES = [
  { file: 'bindings-node/README.md' },
  { file: 'bindings-wasm/README.md' },
  { file: 'README.md', sections: ['Node', 'Browser and edge (wasm)'] },
]

const PACKAGES = ['ratelane', 'ratelane-wasm']

/** The ```js blocks of `text` (in the given `## ` sections), with their line numbers. */
function snippets(text, sections) {
  const out = []
  let section = null
  let block = null
  text.split('\n').forEach((line, i) => {
    if (block !== null) {
      if (line.startsWith('```')) {
        out.push(block)
        block = null
      } else {
        block.code.push(line)
      }
      return
    }
    if (line.startsWith('## ')) section = line.slice(3).trim()
    if (/^```js\s*$/.test(line) && (!sections || sections.includes(section))) block = { line: i + 1, code: [] }
  })
  return out.map((b) => ({ line: b.line, code: b.code.join('\n') + '\n' }))
}

function packagesOf(code) {
  const found = new Set()
  for (const m of code.matchAll(/from\s+'([^']+)'|import\(\s*'([^']+)'\s*\)/g)) {
    const name = (m[1] || m[2]).split('/')[0]
    if (PACKAGES.includes(name)) found.add(name)
  }
  return found
}

const redis = process.env.RATELANE_REDIS_URL

for (const { file, sections } of SOURCES) {
  const text = fs.readFileSync(path.join(repo, file), 'utf8')
  const blocks = snippets(text, sections)
  test(`${file} has JavaScript snippets to run`, () => assert.ok(blocks.length > 0))
  for (const { line, code } of blocks) {
    const uses = packagesOf(code)
    const other = [...uses].find((name) => name !== packageName)
    const needsRedis = /REDIS_URL/.test(code)
    let skip = false
    if (uses.size === 0) skip = false
    else if (other !== undefined) skip = `imports ${other}: run with that package`
    else if (needsRedis && !redis && process.env.RATELANE_REDIS_REQUIRED !== '1') skip = 'needs Redis (RATELANE_REDIS_URL)'
    if (uses.size === 0 && packageName !== 'ratelane') skip = 'imports no ratelane package: run with ratelane'
    test(`${file}:${line} runs as pasted`, { skip }, (t) => {
      const dir = tempDir(t)
      const snippet = path.join(dir, `snippet-${line}.mjs`)
      fs.writeFileSync(snippet, code)
      const run = spawnSync(process.execPath, ['--import', path.join(here, 'readme-preload.mjs'), snippet], {
        cwd: dir,
        encoding: 'utf8',
        timeout: 60_000,
        env: {
          ...process.env,
          DISCORD_TOKEN: 'readme-token',
          OPENAI_API_KEY: 'readme-key',
          ANTHROPIC_API_KEY: 'readme-key',
          GITHUB_TOKEN: 'readme-token',
          REDIS_URL: redis || '',
        },
      })
      assert.equal(run.status, 0, `${file}:${line} exited with ${run.status}${run.signal ? ` (${run.signal})` : ''}\n` +
        `--- stdout\n${run.stdout}\n--- stderr\n${run.stderr}`)
    })
  }
}
