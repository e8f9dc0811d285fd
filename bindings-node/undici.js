// `require('ratelane/undici')` (and `import { interceptor, install } from 'ratelane/undici'`):
// the undici interceptor (js/adapters/undici.js). `install(limiter, { origins })` composes it
// into undici's global dispatcher, which Node's built-in fetch uses too; it needs the undici
// package (7 or later), an optional peer dependency of ratelane.
'use strict'
const ratelane = require('./index.js')
const { createAdapterCommon, createUndiciAdapter } = require('./adapters.cjs')

module.exports = createUndiciAdapter(ratelane, createAdapterCommon(ratelane), {
  loadUndici() {
    try {
      return require('undici')
    } catch (error) {
      throw new Error('ratelane/undici: install() needs the undici package (7 or later): npm install undici', { cause: error })
    }
  },
})
