--[[
ratelane leaky bucket: one atomic check of one request against one key.

The same algorithm and results as ratelane::server::LeakyBucket::check in the core
(core/src/server/leaky_bucket.rs, Sharkey's bucket): a bucket of `size` requests that drips
`drip_size` of them every `drip_rate`, with discrete drips (the first request into an empty
bucket starts the drip clock), and optionally a second bucket of size 1 dripping every
`min_interval` (at least min_interval between two admitted requests; legacy Misskey limits).
A per-subject factor is applied by the caller: pass the scaled size (the core's
LeakyBucket::scaled: floor(size * factor), at least 1). A key's state is shared across sizes.

KEYS[1]  the key: a string "level last_drip spacing_level spacing_last_drip" (four decimal
         integers separated by one space; times in nanoseconds since the clock's epoch, 0 when
         the bucket's level is 0). Absent = empty.
ARGV[1]  size             integer >= 1 and <= 4294967295 (already scaled by the factor)
ARGV[2]  drip_rate_ns     integer >= 1
ARGV[3]  drip_size        integer >= 1 and <= 4294967295,
                          with ceil(size / drip_size) * drip_rate_ns <= 2^52
ARGV[4]  min_interval_ns  integer >= 0 and <= 2^52; 0 = no minimum interval
ARGV[5]  now_ns           optional; decimal integer nanoseconds, at most 2^64 - 1. Absent or ""
                          = Redis's own clock (TIME, Unix epoch). Set it only to replay fixed
                          timestamps (tests); every caller of one key must use the same clock.
ARGV[6]  min_ttl_ms       optional integer >= 0 (default 0): a key's TTL is at least this long.

Reply:
  {"decision", allowed (1|0), limit, remaining, reset_after_ns, clear_after_ns,
   replenish_after_ns (-1 = none), window_ns, now_ns (decimal string)}
      the fields of ratelane::server::Decision; durations relative to now_ns.
Errors: "RATELANE_ARG <what>" for a bad argument, "RATELANE_STATE <what>" for a key that
does not hold a leaky-bucket state; nothing is written in either case, except that a key of
this shape whose level is above 4294967295 (no check writes one: a corrupted key, or another
program's) is deleted, so that only this check fails and the next one starts from an empty
bucket.

State and expiry: after every check the key is deleted if the buckets are empty, otherwise
written (SET ... PX) to expire when both buckets are empty (clear_after), so it expires
exactly when it is empty again. Commands: TIME (unless now_ns is given), GET, SET or DEL.

Precision: as in gcra.lua. Every duration is an exact integer number of nanoseconds relative
to now; windows and min_interval are limited to 2^52 ns (about 52 days). A drip time more than
9,000,000 s (about 104 days) in the past is read as "long ago" (the bucket has drained).
]]

local E9 = 1000000000
local END_S, END_NS = 18446744073, 709551615 -- 2^64 - 1 ns, the end of the core's u64 clock
local MAX_WINDOW = 4503599627370496 -- 2^52 ns
local FAR = 9007199254740992 -- 2^53 ns
local FAR_S = 9000000 -- seconds; FAR_S * E9 + E9 < 2^53
local U32 = 4294967295

-- Exact integer division and remainders for 0 <= a < 2^53, b >= 1 (math.fmod is exact).
local function idiv(a, b) return (a - math.fmod(a, b)) / b end
local function ceil_div(a, b) return idiv(a + b - 1, b) end

-- A decimal integer argument in [lo, hi], or `default` when absent or empty.
local function int_arg(i, lo, hi, default)
  local v = ARGV[i]
  if (v == nil or v == '') and default ~= nil then return default end
  if type(v) ~= 'string' or not string.find(v, '^%d+$') or #v > 16 then return nil end
  local x = tonumber(v)
  if x < lo or x > hi then return nil end
  return x
end

-- A decimal string of nanoseconds as (seconds, nanoseconds), or nil.
local function parse_ns(s)
  if type(s) ~= 'string' or not string.find(s, '^%d+$') or #s > 20 then return nil end
  if #s <= 9 then return 0, tonumber(s) end
  return tonumber(string.sub(s, 1, -10)), tonumber(string.sub(s, -9))
end

local size = int_arg(1, 1, U32)
local drip_rate = int_arg(2, 1, MAX_WINDOW)
local drip_size = int_arg(3, 1, U32)
local min_interval = int_arg(4, 0, MAX_WINDOW)
local min_ttl = int_arg(6, 0, MAX_WINDOW, 0)
if not size then return redis.error_reply('RATELANE_ARG size must be an integer from 1 to 4294967295') end
if not drip_rate then return redis.error_reply('RATELANE_ARG drip_rate_ns must be an integer from 1 to 2^52') end
if not drip_size then return redis.error_reply('RATELANE_ARG drip_size must be an integer from 1 to 4294967295') end
if not min_interval then return redis.error_reply('RATELANE_ARG min_interval_ns must be an integer from 0 to 2^52') end
if not min_ttl then return redis.error_reply('RATELANE_ARG min_ttl_ms must be an integer from 0 to 2^52') end
local window = ceil_div(size, drip_size) * drip_rate
if window > MAX_WINDOW then return redis.error_reply('RATELANE_ARG ceil(size / drip_size) * drip_rate_ns must be at most 2^52') end

local now_s, now_ns
if ARGV[5] == nil or ARGV[5] == '' then
  if redis.replicate_commands then redis.replicate_commands() end -- Redis < 5: effects replication
  local t = redis.call('TIME')
  now_s, now_ns = tonumber(t[1]), tonumber(t[2]) * 1000
else
  now_s, now_ns = parse_ns(ARGV[5])
  if not now_s or now_s > END_S or (now_s == END_S and now_ns > END_NS) then
    return redis.error_reply('RATELANE_ARG now_ns must be a decimal integer of nanoseconds up to 2^64 - 1')
  end
end

-- now + d (|d| < 2^53 - 1e9) as a decimal string of nanoseconds.
local function at(d)
  local t = now_ns + d
  local r = math.fmod(t, E9)
  if r < 0 then r = r + E9 end
  local s = now_s + (t - r) / E9
  if s < 0 then return '0' end
  if s > 0 then return string.format('%d%09d', s, r) end
  return string.format('%d', r)
end

-- A bucket read from the stored value: level, and last = last drip - now in nanoseconds.
local function read_bucket(level_s, last_s)
  local level = tonumber(level_s)
  if level == 0 then return {level = 0, last = 0} end
  local s, ns = parse_ns(last_s)
  if not s then return nil end
  local ds = s - now_s
  local last
  if ds < -FAR_S then last = -FAR elseif ds > FAR_S then last = FAR else last = ds * E9 + (ns - now_ns) end
  return {level = level, last = last}
end

-- Applies every whole drip due now.
local function drip(b, rate, amount)
  if b.level == 0 then return end
  local gap = -b.last
  if gap < 0 then gap = 0 end
  local drips = idiv(gap, rate)
  if drips == 0 then return end
  if drips * amount >= b.level then
    b.level, b.last = 0, 0
  else
    b.level = b.level - drips * amount
    b.last = b.last + drips * rate
  end
end

-- Adds one request; the first one into an empty bucket starts the drip clock.
local function add(b)
  if b.level == 0 then b.last = 0 end
  b.level = b.level + 1
end

-- Time from now until the level is at most `target` (0 if it already is).
local function time_until(b, target, rate, amount)
  if b.level <= target then return 0 end
  local gap = -b.last
  if gap < 0 then gap = 0 end
  local t = ceil_div(b.level - target, amount) * rate - gap
  if t < 0 then return 0 end
  return t
end

local key = KEYS[1]
local stored = redis.call('GET', key)
local main, spacing = {level = 0, last = 0}, {level = 0, last = 0}
if stored then
  local l, d, sl, sd = string.match(stored, '^(%d+) (%d+) (%d+) (%d+)$')
  if l then
    main = read_bucket(l, d)
    spacing = read_bucket(sl, sd)
  end
  if not l or not main or not spacing then
    return redis.error_reply('RATELANE_STATE the key does not hold a leaky-bucket state')
  end
  if main.level > U32 or spacing.level > U32 then
    -- Beyond any bucket's size, and beyond what Lua's numbers hold exactly: reset the key
    -- rather than fail every check on it.
    redis.call('DEL', key)
    return redis.error_reply('RATELANE_STATE the key holds a leaky-bucket level out of range; it was reset')
  end
end

drip(main, drip_rate, drip_size)
if min_interval > 0 then drip(spacing, min_interval, 1) end
local allowed = main.level < size and spacing.level == 0
if allowed then
  add(main)
  if min_interval > 0 then add(spacing) end
end

-- The spacing bucket has size 1: room for one more and empty are the same thing.
local spacing_wait = 0
if min_interval > 0 then spacing_wait = time_until(spacing, 0, min_interval, 1) end
local reset_after = time_until(main, size - 1, drip_rate, drip_size)
if spacing_wait > reset_after then reset_after = spacing_wait end
local remaining = 0
if spacing.level == 0 and main.level < size then remaining = size - main.level end
local replenish_after
if remaining == 0 then
  replenish_after = reset_after
elseif main.level == 0 then
  replenish_after = -1
else
  replenish_after = time_until(main, main.level - 1, drip_rate, drip_size)
end
local clear_after = time_until(main, 0, drip_rate, drip_size)
if spacing_wait > clear_after then clear_after = spacing_wait end

if clear_after == 0 then
  if stored then redis.call('DEL', key) end
else
  local function last(b) if b.level == 0 then return '0' end return at(b.last) end
  local ttl = ceil_div(clear_after, 1000000)
  if ttl < min_ttl then ttl = min_ttl end
  redis.call('SET', key, string.format('%d %s %d %s', main.level, last(main), spacing.level, last(spacing)), 'PX', ttl)
end

return {'decision', allowed and 1 or 0, size, remaining, reset_after, clear_after, replenish_after, window, at(0)}
