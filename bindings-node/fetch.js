// `require('ratelane/fetch')` (and `import { ratelaneFetch } from 'ratelane/fetch'`): a
// fetch-compatible function over a RateLimiter, for every client that takes a `fetch`
// (js/adapters/fetch.js). The same function as the main entry's `ratelaneFetch`.
'use strict'
const { ratelaneFetch } = require('./index.js')

module.exports = { ratelaneFetch }
