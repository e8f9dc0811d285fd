// Types of `require('ratelane/redis')` (redis.js): Redis for ratelane.
export * from './redis_store'
