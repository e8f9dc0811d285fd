// `require('ratelane/redis')`: Redis for ratelane. The server-side limiters evaluated in Redis
// (RedisGcra, RedisLeakyBucket, RedisFixedWindow and their errors) are in redis_limiters.js.
// node-redis (npm `redis`) is the application's: nothing here requires it.
'use strict'
module.exports = {
  ...require('./redis_limiters.js'),
}
