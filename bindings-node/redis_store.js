// `RedisStore`: the Redis store of the Promise driver's shared mode, for several processes of
// one bot sharing one token's limits (`new RateLimiter({ shared: new RedisStore(...) })`).
// The store is ../js/redis_store.js (redis_store.cjs, made by build.js); it runs the one
// store script redis/scripts/shared_store.lua, shipped beside it as shared_store.lua.
// Needs the `redis` package (node-redis), an optional peer dependency: npm install redis
'use strict'
const crypto = require('node:crypto')
const fs = require('node:fs')
const path = require('node:path')
const ratelane = require('./index.js')

for (const file of ['redis_store.cjs', 'shared_store.lua']) {
  if (!fs.existsSync(path.join(__dirname, file))) {
    throw new Error(`ratelane/redis: ${file} is missing: the package was not built. Run \`node build.js\` in ${__dirname}.`)
  }
}
const { createRedisStore } = require('./redis_store.cjs')

const SHARED_STORE_LUA = fs.readFileSync(path.join(__dirname, 'shared_store.lua'), 'utf8')

/** A node-redis client for a URL; connected by the store, with no retries of its own per command. */
function connect(url, { connectTimeout }) {
  let redis
  try {
    redis = require('redis')
  } catch (error) {
    throw new Error('ratelane/redis needs the redis package (node-redis): npm install redis', { cause: error })
  }
  const client = redis.createClient({
    url,
    // Commands fail at once while disconnected (the store answers "unavailable"), instead of
    // waiting in node-redis's offline queue and taking grants nobody is waiting for any more.
    disableOfflineQueue: true,
    socket: { connectTimeout: Math.max(1, Math.ceil(connectTimeout)) },
  })
  // Like the limiter's housekeeping timer, the connection alone does not keep the process
  // alive: a request waiting for Redis does (the driver's reservation timer).
  if (typeof client.unref === 'function') client.unref()
  return client
}

const store = createRedisStore({
  ratelane,
  script: SHARED_STORE_LUA,
  sha: crypto.createHash('sha1').update(SHARED_STORE_LUA).digest('hex'),
  connect,
  randomId: () => crypto.randomUUID(),
})

module.exports = {
  RedisStore: store.RedisStore,
  reserveArgs: store.reserveArgs,
  recordArgs: store.recordArgs,
  parseAnswer: store.parseAnswer,
  SHARED_STORE_LUA,
}
