'use strict';
// The package's TypeScript types as a user of each build sees them (test/types/consumer.*),
// checked with tsc --noEmit, including that every build satisfies js/core.d.ts's CoreModule.
const test = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { spawnSync } = require('node:child_process');

test('tsc --noEmit over consumers of every entry point', () => {
  const root = path.join(__dirname, '..');
  const tsc = require.resolve('typescript/bin/tsc', { paths: [root] });
  const run = spawnSync(process.execPath, [tsc, '-p', path.join('test', 'types')], { cwd: root, encoding: 'utf8' });
  assert.equal(run.status, 0, `tsc failed:\n${run.stdout}${run.stderr}`);
});
