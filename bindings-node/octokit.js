// `require('ratelane/octokit')` (and `import { ratelaneOctokit } from 'ratelane/octokit'`): an
// Octokit plugin in the place of @octokit/plugin-throttling (js/adapters/octokit.js):
// `Octokit.plugin(ratelaneOctokit)`.
'use strict'
const ratelane = require('./index.js')
const { createAdapterCommon, createOctokitAdapter } = require('./adapters.cjs')

module.exports = createOctokitAdapter(ratelane, createAdapterCommon(ratelane))
