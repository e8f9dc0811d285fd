// `require('ratelane/redis')`: Redis for ratelane (needs the `redis` package: npm install redis).
'use strict'
module.exports = { ...require('./redis_store.js') }
