--[[
ratelane GCRA: one atomic check of a request of weight n against one key.

The same algorithm, convention and results as ratelane::server::Gcra::check_n in the core
(core/src/server/gcra.rs): a key admits one request per `interval` and up to `burst` back to
back; `burst = N` admits exactly N requests on an empty key (governor's convention).

KEYS[1]  the key (a string value holding the theoretical arrival time, TAT, as decimal
         integer nanoseconds since the clock's epoch). Absent = empty.
ARGV[1]  interval_ns  integer >= 1, nanoseconds between two requests at the sustained rate
ARGV[2]  burst        integer >= 1 and <= 4294967295, with interval_ns * burst <= 2^52
ARGV[3]  n            integer >= 0 and <= 4294967295, the request's weight (0 = peek: always
                      allowed, changes nothing, describes the key)
ARGV[4]  now_ns       optional; decimal integer nanoseconds, at most 2^64 - 1. Absent or ""
                      = Redis's own clock (TIME, Unix epoch). Set it only to replay fixed
                      timestamps (tests); every caller of one key must use the same clock.
ARGV[5]  min_ttl_ms   optional integer >= 0 (default 0): a key's TTL is at least this long.
                      For replays that run virtual time faster than real time.

Reply, one of:
  {"decision", allowed (1|0), limit, remaining, reset_after_ns, clear_after_ns,
   replenish_after_ns (-1 = none), window_ns, now_ns (decimal string)}
      the fields of ratelane::server::Decision; durations relative to now_ns.
  {"insufficient_capacity", requested, capacity}
      n > burst: the request can never be admitted (nothing is changed).
Errors: "RATELANE_ARG <what>" for a bad argument, "RATELANE_STATE <what>" for a key that
does not hold a GCRA state, "RATELANE_CLOCK <what>" when now_ns is later than
2^64 - 1 - interval_ns * burst (the core's Gcra::last_instant: an admitted request could move
the TAT past the end of the u64 clock, and the core refuses such a now); nothing is written in
these cases. Redis's own clock (TIME) is that late only after the year 2554.

State and expiry: the value is written only when an admitted request moves the TAT (SET ... PX
until the TAT, so the key expires exactly when it is empty again) and deleted when an admitted
check leaves it empty. A blocked check writes nothing.

Precision: Lua numbers are doubles, exact for integers below 2^53. Absolute times are split
into seconds and nanoseconds, every duration is computed relative to now in integer
nanoseconds, and configured windows are limited to 2^52 ns (about 52 days), so every value is
an exact integer. A stored time more than 9,000,000 s (about 104 days) from now is read as
"long ago" (empty) or "far ahead" (2^53 ns).
]]

local E9 = 1000000000
local END_S, END_NS = 18446744073, 709551615 -- 2^64 - 1 ns, the end of the core's u64 clock
local MAX_WINDOW = 4503599627370496 -- 2^52 ns
local FAR = 9007199254740992 -- 2^53 ns
local FAR_S = 9000000 -- seconds; FAR_S * E9 + E9 < 2^53

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

local interval = int_arg(1, 1, MAX_WINDOW)
local burst = int_arg(2, 1, 4294967295)
local n = int_arg(3, 0, 4294967295)
local min_ttl = int_arg(5, 0, MAX_WINDOW, 0)
if not interval then return redis.error_reply('RATELANE_ARG interval_ns must be an integer from 1 to 2^52') end
if not burst then return redis.error_reply('RATELANE_ARG burst must be an integer from 1 to 4294967295') end
if not n then return redis.error_reply('RATELANE_ARG n must be an integer from 0 to 4294967295') end
if not min_ttl then return redis.error_reply('RATELANE_ARG min_ttl_ms must be an integer from 0 to 2^52') end
local tau = interval * burst
if tau > MAX_WINDOW then return redis.error_reply('RATELANE_ARG interval_ns * burst must be at most 2^52') end

local now_s, now_ns
if ARGV[4] == nil or ARGV[4] == '' then
  if redis.replicate_commands then redis.replicate_commands() end -- Redis < 5: effects replication
  local t = redis.call('TIME')
  now_s, now_ns = tonumber(t[1]), tonumber(t[2]) * 1000
else
  now_s, now_ns = parse_ns(ARGV[4])
  if not now_s or now_s > END_S or (now_s == END_S and now_ns > END_NS) then
    return redis.error_reply('RATELANE_ARG now_ns must be a decimal integer of nanoseconds up to 2^64 - 1')
  end
end

-- Whether now + d (0 <= d <= 2^52) is after 2^64 - 1 ns.
local function past_end(d)
  local t = now_ns + d
  local r = math.fmod(t, E9)
  local s = now_s + (t - r) / E9
  return s > END_S or (s == END_S and r > END_NS)
end

if past_end(tau) then
  return redis.error_reply('RATELANE_CLOCK now_ns is later than 2^64 - 1 - interval_ns * burst: the TAT could pass the end of the u64 clock')
end

-- stored time - now, in nanoseconds (clamped to +-2^53 beyond FAR_S seconds).
local function since(s, ns)
  local ds = s - now_s
  if ds < -FAR_S then return -FAR end
  if ds > FAR_S then return FAR end
  return ds * E9 + (ns - now_ns)
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

if n > burst then return {'insufficient_capacity', n, burst} end

local key = KEYS[1]
local stored = redis.call('GET', key)
local tat = 0 -- max(TAT, now) - now
if stored then
  local s, ns = parse_ns(stored)
  if not s then return redis.error_reply('RATELANE_STATE the key does not hold a GCRA state') end
  tat = since(s, ns)
  if tat < 0 then tat = 0 end
end

local new_tat = tat + n * interval
local allowed = new_tat <= tau
-- The level of the bucket in time units: how far ahead of now the key is.
local level = tat
if allowed then level = new_tat end

local room = tau - level
if room < 0 then room = 0 end
local remaining = idiv(room, interval)
local reset_after
if allowed then
  reset_after = level + interval - tau
  if reset_after < 0 then reset_after = 0 end
else
  reset_after = new_tat - tau
end
local replenish_after = -1
if remaining < burst then replenish_after = level - (tau - (remaining + 1) * interval) end

if allowed then
  if level == 0 then
    if stored then redis.call('DEL', key) end
  elseif n > 0 then
    local ttl = ceil_div(level, 1000000)
    if ttl < min_ttl then ttl = min_ttl end
    redis.call('SET', key, at(level), 'PX', ttl)
  end
end

return {'decision', allowed and 1 or 0, burst, remaining, reset_after, level, replenish_after, tau, at(0)}
