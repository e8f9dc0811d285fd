// `require('ratelane/redis')`: Redis for ratelane. node-redis (npm `redis`) is the application's
// (an optional peer dependency): nothing here requires it but the URL form of RedisStore.
// - RedisStore (redis_store.js): the store of the driver's shared mode (several processes
//   sharing one token's limits: `new RateLimiter({ shared: store })`).
// - RedisGcra, RedisLeakyBucket, RedisFixedWindow and their errors (redis_limiters.js): the
//   server-side limiters evaluated atomically in Redis.
'use strict'
module.exports = {
  ...require('./redis_store.js'),
  ...require('./redis_limiters.js'),
}
