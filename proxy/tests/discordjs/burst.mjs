// discord.js (the version pinned in package.json) sending a burst of messages, as a bot does,
// to the REST base URL given: ratelane-proxy, or the Discord imitation directly (discord.js
// alone). Run by proxy/tests/discordjs.rs and by the proxy benchmark (BENCHMARKS.md).
//
//   node burst.mjs <api> <token> <channels> <per_channel> [first_rid]
//
// <api> is discord.js's `rest.api` (`http://127.0.0.1:PORT/api`: discord.js adds `/v10`).
// Every message carries `?rid=N` so the imitation can tell a request sent twice. Prints one
// JSON line: {"library", "sent", "ok", "errors": {name: count}, "statuses": {status: count},
// "seconds"}.
import { Client, Routes, version, DiscordAPIError, HTTPError, RateLimitError } from 'discord.js'

const [api, token, channels, perChannel, firstRid = '1'] = process.argv.slice(2)
if (!api || !token || !channels || !perChannel) {
  console.error('usage: node burst.mjs <api> <token> <channels> <per_channel> [first_rid]')
  process.exit(2)
}

const client = new Client({ intents: [], rest: { api } })
client.rest.setToken(token)

const jobs = []
let rid = Number(firstRid)
for (let m = 0; m < Number(perChannel); m++) {
  for (let c = 0; c < Number(channels); c++) {
    jobs.push({ channel: String(100000000000000001n + BigInt(c)), rid: rid++ })
  }
}

const errors = {}
const statuses = {}
let ok = 0
const start = performance.now()
await Promise.all(jobs.map(async ({ channel, rid }) => {
  try {
    await client.rest.post(Routes.channelMessages(channel), {
      body: { content: `message ${rid}` },
      query: new URLSearchParams({ rid: String(rid) }),
    })
    ok += 1
    statuses[200] = (statuses[200] || 0) + 1
  } catch (error) {
    let name = (error && (error.code || error.name)) || String(error)
    for (const cls of [DiscordAPIError, HTTPError, RateLimitError]) {
      if (error instanceof cls) name = cls.name
    }
    errors[name] = (errors[name] || 0) + 1
    if (error && error.status) statuses[error.status] = (statuses[error.status] || 0) + 1
  }
}))
const seconds = (performance.now() - start) / 1000
client.rest.clearHashSweeper()
client.rest.clearHandlerSweeper()
await client.destroy()
console.log(JSON.stringify({ library: `discord.js ${version}`, sent: jobs.length, ok, errors, statuses, seconds }))
