// `require('ratelane/discordjs')` (and `import { discordRest } from 'ratelane/discordjs'`):
// REST options that put ratelane under discord.js and @discordjs/rest
// (js/adapters/discordjs.js): `new Client({ intents, rest: discordRest(limiter) })`. The HTTP
// is @discordjs/rest's own (an optional peer dependency; discord.js depends on it).
'use strict'
const ratelane = require('./index.js')
const { createAdapterCommon, createDiscordjsAdapter } = require('./adapters.cjs')

module.exports = createDiscordjsAdapter(ratelane, createAdapterCommon(ratelane), {
  loadDiscordRest() {
    try {
      return require('@discordjs/rest')
    } catch (_) {
      return null // no @discordjs/rest: the global fetch does the HTTP
    }
  },
})
