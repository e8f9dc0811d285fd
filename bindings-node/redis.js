// `require('ratelane/redis')`: Redis for ratelane (see redis_limiters.js).
'use strict'
module.exports = require('./redis_limiters.js')
