--[[
ratelane fixed window: one atomic check, schedule or release against one key (a group).

The same algorithm and results as ratelane::server::FixedWindow in the core
(core/src/server/fixed_window.rs): `quota` slots per `window`; a window opens with the first
request of an idle group and the following windows follow it back to back while slots are
booked in them. `check` admits a request if the current window has a free slot; `schedule`
books a slot for a job (it runs now, or is delayed to the window holding its slot:
release_at = next window start + floor(waiting / quota) * window); `release` records that one
delayed job was released (or dropped).

KEYS[1]  the key: a string "window_start booked waiting" (three decimal integers separated
         by one space; window_start in nanoseconds since the clock's epoch, 0 when booked is
         0). Absent = empty.
ARGV[1]  op          "check" | "schedule" | "release"
ARGV[2]  quota       integer >= 1 and <= 4294967295
ARGV[3]  window_ns   integer >= 1 and <= 2^52
ARGV[4]  now_ns      optional; decimal integer nanoseconds, at most 2^64 - 1. Absent or ""
                     = Redis's own clock (TIME, Unix epoch). Set it only to replay fixed
                     timestamps (tests); every caller of one key must use the same clock.
ARGV[5]  min_ttl_ms  optional integer >= 0 (default 0): a key's TTL is at least this long.

Reply, by op:
  check:    {"decision", allowed (1|0), limit, remaining, reset_after_ns, clear_after_ns,
             replenish_after_ns (-1 = none), window_ns, now_ns (decimal string)}
                the fields of ratelane::server::Decision; durations relative to now_ns.
  schedule: {"scheduled", run_now (1|0), release_at_ns (decimal string, absolute, same clock
             as now_ns), waiting, now_ns (decimal string)}
                the fields of ratelane::server::Scheduled.
  release:  {"released", released (1|0)}
Errors: "RATELANE_ARG <what>" for a bad argument, "RATELANE_STATE <what>" for a key that
does not hold a fixed-window state, "RATELANE_RANGE <what>" when a scheduled job's window
would end more than 2^52 ns (about 52 days) from now, "RATELANE_CLOCK <what>" when a
scheduled job would be released after 2^64 - 1 ns (the end of the core's u64 clock: the core
refuses such a booking too); nothing is written in these cases, except that a key of this
shape whose booked or waiting count is 2^53 or more (no op writes one: a corrupted key, or
another program's) is deleted, so that only this op fails and the next one starts from an
idle group. Checks and releases answer at every now up to 2^64 - 1, as the core does.

State and expiry: after every op the key is deleted if the group is idle (no delayed job
waiting for its release and every booked window over), otherwise written (SET ... PX) to
expire when its last booked window is over, plus one more window while delayed jobs have not been
released: a job must start within its window, so a job still unreleased after that is
forgotten (the in-memory store would keep counting it until it is released). Commands: TIME
(unless now_ns is given), GET, SET or DEL.

Precision: as in gcra.lua. Every duration is an exact integer number of nanoseconds relative
to now; the window is limited to 2^52 ns, and so is the time until the last booked window.
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

local op = ARGV[1]
local quota = int_arg(2, 1, U32)
local window = int_arg(3, 1, MAX_WINDOW)
local min_ttl = int_arg(5, 0, MAX_WINDOW, 0)
if op ~= 'check' and op ~= 'schedule' and op ~= 'release' then
  return redis.error_reply('RATELANE_ARG op must be check, schedule or release')
end
if not quota then return redis.error_reply('RATELANE_ARG quota must be an integer from 1 to 4294967295') end
if not window then return redis.error_reply('RATELANE_ARG window_ns must be an integer from 1 to 2^52') end
if not min_ttl then return redis.error_reply('RATELANE_ARG min_ttl_ms must be an integer from 0 to 2^52') end

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

-- Whether now + d (0 <= d <= 2^53 - 1e9) is after 2^64 - 1 ns.
local function past_end(d)
  local t = now_ns + d
  local r = math.fmod(t, E9)
  local s = now_s + (t - r) / E9
  return s > END_S or (s == END_S and r > END_NS)
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

local key = KEYS[1]
local stored = redis.call('GET', key)
local booked, waiting = 0, 0
local start = 0 -- window start - now, in nanoseconds; meaningless when booked is 0
if stored then
  local start_s, booked_s, waiting_s = string.match(stored, '^(%d+) (%d+) (%d+)$')
  local s, ns = parse_ns(start_s)
  if not s then return redis.error_reply('RATELANE_STATE the key does not hold a fixed-window state') end
  booked, waiting = tonumber(booked_s), tonumber(waiting_s)
  if booked >= FAR or waiting >= FAR then
    -- Beyond what Lua's numbers count exactly: reset the key rather than fail every op on it.
    redis.call('DEL', key)
    return redis.error_reply('RATELANE_STATE the key holds a fixed-window count out of range; it was reset')
  end
  if booked > 0 then
    local ds = s - now_s
    if ds < -FAR_S then start = -FAR elseif ds > FAR_S then start = FAR else start = ds * E9 + (ns - now_ns) end
  end
end

-- The start of the k-th window after the current one, relative to now.
local function window_at(k) return start + k * window end

-- Moves the current window forward to the one holding now, giving back the slots of the
-- windows that are over.
local function roll()
  if booked == 0 or window_at(1) > 0 then return end
  local elapsed = idiv(-start, window)
  local consumed = elapsed * quota
  if booked <= consumed then
    booked = 0
  else
    start = start + elapsed * window
    booked = booked - consumed
  end
end

-- Books the next slot (opening a window now if none is open); returns its index.
local function book()
  if booked == 0 then start = 0 end
  booked = booked + 1
  return booked - 1
end

local function until_window(k)
  local d = window_at(k)
  if d < 0 then return 0 end
  return d
end

local reply
if op == 'check' then
  roll()
  local allowed = booked < quota
  if allowed then book() end
  local full = idiv(booked, quota)
  local reset_after = 0
  if full > 0 then reset_after = until_window(full) end
  local clear_after = 0
  if booked > 0 then clear_after = until_window(ceil_div(booked, quota)) end
  local replenish_after = -1
  if booked > 0 then
    if full > 1 then replenish_after = until_window(full) else replenish_after = until_window(1) end
  end
  local remaining = 0
  if booked < quota then remaining = quota - booked end
  reply = {'decision', allowed and 1 or 0, quota, remaining, reset_after, clear_after, replenish_after, window, at(0)}
elseif op == 'schedule' then
  roll()
  local slot = book()
  local w = idiv(slot, quota)
  if window_at(ceil_div(booked, quota)) > MAX_WINDOW then
    return redis.error_reply('RATELANE_RANGE the job\'s window would end more than 2^52 ns from now')
  end
  if w > 0 and past_end(window_at(w)) then
    return redis.error_reply('RATELANE_CLOCK the job would be released after 2^64 - 1 ns, the end of the u64 clock')
  end
  if w == 0 then
    reply = {'scheduled', 1, at(0), waiting, at(0)}
  else
    waiting = waiting + 1
    reply = {'scheduled', 0, at(window_at(w)), waiting, at(0)}
  end
else
  local released = waiting > 0
  if released then waiting = waiting - 1 end
  reply = {'released', released and 1 or 0}
end

local last_end = 0 -- until every booked window is over
if booked > 0 then last_end = until_window(ceil_div(booked, quota)) end
if waiting == 0 and last_end == 0 then
  if stored then redis.call('DEL', key) end
else
  local ttl_ns = last_end
  if waiting > 0 then ttl_ns = ttl_ns + window end
  local ttl = ceil_div(ttl_ns, 1000000)
  if ttl < min_ttl then ttl = min_ttl end
  local start_at = '0'
  if booked > 0 then start_at = at(start) end
  redis.call('SET', key, string.format('%s %d %d', start_at, booked, waiting), 'PX', ttl)
end

return reply
