// The Discord-like server of ../test/discord-server.cjs in a process of its own, so the
// benchmark measures the client's CPU alone. argv[2]: JSON {config, latencyMs, jitterMs}.
// Prints its URL; GET /__stats answers the counts; exits when stdin closes or after 5 min.
'use strict'
const { startDiscordServer } = require('../test/discord-server.cjs')

const options = JSON.parse(process.argv[2] || '{}')
startDiscordServer({ ...options, lifetimeMs: 300_000 }).then((server) => {
  process.stdout.write(`${server.url}\n`)
  process.stdin.resume()
  process.stdin.on('end', () => server.close().then(() => process.exit(0)))
  setTimeout(() => process.exit(0), 300_000).unref()
})
