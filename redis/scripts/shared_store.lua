--[[
ratelane shared store: the store of the core's shared mode (several processes sharing one
token's limits), one atomic call per operation.

This script implements exactly the store contract documented in the core, module
`ratelane::shared` ("The store contract", key by key), whose reference model is
`ratelane::shared::MemoryStore`; tests/vectors/store_*.json replay both. Two operations:

  reserve(now, client, reservation) -> granted(processes) | denied(retry_after, scope, processes)
  record(now, client, update)

KEYS[1]  the namespace prefix P (every key this script touches starts with it). Give it a Redis
         Cluster hash tag, e.g. "{ratelane:mybot}:", so that all keys live in one slot; it is
         passed as a key so that a cluster client routes the call to that slot.

ARGV, common part:
  [1] op            "reserve", "record" or "batch"
  [2] now_ns        "" = Redis's clock (TIME). Otherwise decimal integer nanoseconds of a
                    virtual clock, for replays (tests): expiry is then virtual too (below).
  [3] client        the calling process's identity (non-empty; e.g. a random UUID)
  [4] lease_ns      SharedConfig::lease
  [5] poll_ns       SharedConfig::pioneer_poll
  [6] ttl_ns        SharedConfig::state_ttl
"reserve" (ratelane::shared::Reservation):
  [7] id  [8] identity  [9] route  [10] major  [11] bucket (opt)  [12] counts_global (0|1)
  [13] global_limit  [14] global_window_ns  [15] margin_ns  [16] invalid_limit
  [17] invalid_window_ns  [18] global_want (optional: absent or "" is 1; 0 spends a leased
  token)  [19] processes_since_ns (optional: absent or "" for none)  [20] reporting (optional:
  absent or "" is 0; 0|1)  [21] unrecorded_ns  [22] granted_ns (optional: absent or "" for
  none; otherwise ages in nanoseconds, decimal integers separated by ",")
"record" (ratelane::shared::SharedUpdate), [7] the variant:
  "bucket":  [8] id [9] identity [10] route [11] major [12] bucket (opt) [13] unlimited (0|1)
             [14] limit (opt) [15] remaining (opt) [16] reset_after_ns (opt) [17] window_ns (opt)
  "release": [8] id [9] identity [10] route [11] major [12] bucket (opt) [13] reached (0|1)
             [14] window_ns (opt)
  "hold":    [8] scope [9] identity [10] route [11] major [12] bucket (opt) [13] retry_after_ns
  "invalid": [8] id [9] window_ns
"batch" (several operations in one call, one round trip): [7] and on, a sequence of items, each
  its argument count n (op included), then its op ("reserve" or "record"), then its n - 1
  arguments exactly as a single call has them at [7] and on. Each item runs as its own call
  would, in order, within this one atomic call.
Numbers are decimal integers; an optional number is "" when absent. An optional string (the
bucket hash) is "" when absent and "=" followed by the value when present.

Reply: reserve -> {"granted", processes, leased, now_us} or {"denied", retry_after_us, scope, processes};
record -> {"recorded"}; batch -> one reply per item, in order, an item refused for a bad argument
answering {"error", "RATELANE_ARG <what>"} in its place (the others still run). processes: how many clients reserved within the last lease_ns (the key P "procs"),
or with processes_since_ns how many within that long; a reservation `reporting` does not add
its client. now_us: the script's clock (microseconds) when it granted, the time the global token
counts from; the process learns from it how unevenly its grants reach it (for its margin).
Errors: "RATELANE_ARG <what>" for a bad argument (nothing written).

Time. The script works in integer microseconds (Redis TIME's resolution). Durations given in
nanoseconds are rounded up to whole microseconds; retry_after in the reply is in microseconds
(multiply by 1000 for the core). Durations are capped at 2^50 us (35 years), so that every
absolute time stays an exact integer in a Lua number. Like Redis's own expiry, the script
assumes that Redis's clock does not go backwards.

Expiry. With Redis's clock, keys carry real TTLs (PEXPIREAT, rounded up to the millisecond) and
disappear on their own. With a virtual clock (now_ns given), real TTLs would not follow the
replayed time, so the script keeps each key's expiry time in the sorted set P "~expiry"
(member: the key, score: the time it expires) instead, deletes the keys whose time has come
at the start of every call, and sets no real TTL. Every caller of one namespace must use the
same clock; a test counts the live keys of a namespace as those of "~expiry" whose score is
later than now.
]]

local P = KEYS[1]
local MAX_US = 1125899906842624 -- 2^50 us

local function arg_error(what)
  return redis.error_reply('RATELANE_ARG ' .. what)
end

-- Exact integer arithmetic on doubles below 2^53.
local function floor_div(a, b) return (a - math.fmod(a, b)) / b end

-- A duration in ns (decimal string) as whole microseconds, rounded up and capped.
local function us_of(s)
  local n = tonumber(s)
  if n >= 9007199254740992 then return MAX_US end
  local u = floor_div(n + 999, 1000)
  if u > MAX_US then return MAX_US end
  return u
end

local function digits(s) return type(s) == 'string' and s:match('^%d+$') ~= nil and #s <= 20 end

local bad = nil
-- The operation's arguments: ARGV itself for a single call; for an item of a "batch" call,
-- its arguments seen at the indices a single call would have (see `run_item`).
local shift, last = 0, nil
local function arg(i)
  if i < 7 then return ARGV[i] end
  if last ~= nil and i > last then return nil end
  return ARGV[i + shift]
end
-- Numbers read, by their text: the items of a batch repeat the same limits and windows, and
-- checking and converting a text costs more than looking it up.
local ints, uss = {}, {}
local function need_int(i, what)
  local s = arg(i)
  local n = ints[s]
  if n then return n end
  if not digits(s) then bad = bad or (what .. ' must be a decimal integer') return 0 end
  n = tonumber(s)
  ints[s] = n
  return n
end
local function need_us(i, what)
  local s = arg(i)
  local n = uss[s]
  if n then return n end
  if not digits(s) then bad = bad or (what .. ' must be a decimal integer of nanoseconds') return 0 end
  n = us_of(s)
  uss[s] = n
  return n
end
local function opt_int(i, what)
  if arg(i) == '' then return nil end
  return need_int(i, what)
end
local function opt_us(i, what)
  if arg(i) == '' then return nil end
  return need_us(i, what)
end
local function opt_str(i, what)
  local s = arg(i)
  if s == nil then bad = bad or (what .. ' is missing') return nil end
  if s == '' then return nil end
  if s:sub(1, 1) ~= '=' then bad = bad or (what .. ' must be "" or "=" followed by the value') return nil end
  return s:sub(2)
end
local function need_str(i, what)
  local s = arg(i)
  if s == nil then bad = bad or (what .. ' is missing') return '' end
  return s
end
local function need_flag(i, what)
  local s = arg(i)
  if s ~= '0' and s ~= '1' then bad = bad or (what .. ' must be 0 or 1') return false end
  return s == '1'
end

local op = ARGV[1]
if op ~= 'reserve' and op ~= 'record' and op ~= 'batch' then
  return arg_error('op must be "reserve", "record" or "batch"')
end
if P == nil or P == '' then return arg_error('KEYS[1] (the prefix) is required') end

local now
local virtual = ARGV[2] ~= nil and ARGV[2] ~= ''
if virtual then
  if not digits(ARGV[2]) then return arg_error('now_ns must be a decimal integer or ""') end
  -- Whole microseconds, by dropping the last three digits: Unix nanoseconds do not fit in a
  -- Lua number exactly, their microseconds do.
  local s = ARGV[2]
  if #s > 3 then now = tonumber(s:sub(1, -4)) else now = 0 end
  if now >= 9007199254740992 then return arg_error('now_ns is out of range') end
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local client = need_str(3, 'client')
if client == '' then return arg_error('client must not be empty') end
local lease = need_us(4, 'lease_ns')
local poll = need_us(5, 'poll_ns')
local ttl = need_us(6, 'ttl_ns')
-- two reported window ends may differ by this for one end: each comes rounded to the ms (µs)
local report_rounding = 2000
if bad then return arg_error(bad) end
if lease < 1 then lease = 1 end
if poll < 1 then poll = 1 end
if ttl < 1 then ttl = 1 end

local function fmt(n) return string.format('%.0f', n) end
local NOW = fmt(now)

-- ------------------------------------------------------------------------------- expiry

local IDX = P .. '~expiry'

if virtual then
  -- Keys whose virtual time has come are gone, as Redis would have expired them.
  local dead = redis.call('ZRANGEBYSCORE', IDX, '-inf', NOW)
  for _, k in ipairs(dead) do redis.call('DEL', k) end
  if #dead > 0 then redis.call('ZREMRANGEBYSCORE', IDX, '-inf', NOW) end
end

-- What this call has read or written, by key. A call is atomic and `now` stands still in it
-- (Redis freezes key expiry during a script), so these stay true until the call itself writes
-- the key; every write below goes through the helpers that keep them true. They spare the
-- script's own commands, each of which costs about as much as the Lua around it:
--   strings[key]   the value of a string key (false: absent)
--   states[key]    a bucket's state table (`bucket_state`; false: absent)
--   expiries[key]  the expiry this call set (us); cleared by anything that may delete the key
local strings, states, expiries = {}, {}, {}

-- Writes that may empty (and so delete) a key: what this call knows of it goes.
local function zrem(key, ...)
  expiries[key] = nil
  return redis.call('ZREM', key, ...)
end
local function zremrange(key, lo, hi)
  expiries[key] = nil
  return redis.call('ZREMRANGEBYSCORE', key, lo, hi)
end

-- When `key` expires (us), or nil when it does not exist.
local function expiry_of(key)
  if virtual then
    if redis.call('EXISTS', key) == 0 then return nil end
    local s = redis.call('ZSCORE', IDX, key)
    if s then return tonumber(s) end
    return nil
  end
  local ms = redis.call('PEXPIRETIME', key)
  if ms < 0 then return nil end
  return ms * 1000
end

local function del(key)
  redis.call('DEL', key)
  if virtual then redis.call('ZREM', IDX, key) end
  strings[key], states[key], expiries[key] = false, false, nil
end

-- Redis's expiry time (ms) of a key that expires at `t` (us).
local function ms_of(t) return fmt(floor_div(t + 999, 1000)) end

-- `key` expires at `t` (us); at or before now it is deleted.
local function expire_at(key, t)
  if t <= now then del(key) return end
  if expiries[key] == t then return end
  if virtual then
    redis.call('ZADD', IDX, fmt(t), key)
    expiries[key] = t
  elseif redis.call('PEXPIREAT', key, ms_of(t)) == 1 then
    expiries[key] = t
  end
end

-- The string key `key` holds `value` until `t` (us): one command where SET and expire_at
-- would be two; at or before now it is deleted.
local function set_until(key, value, t)
  if t <= now then del(key) return end
  -- (already so in this call: many reports of one batch refresh the same route's mapping)
  if strings[key] == value and expiries[key] == t then return end
  if virtual then
    redis.call('SET', key, value)
    redis.call('ZADD', IDX, fmt(t), key)
  else
    redis.call('SET', key, value, 'PXAT', ms_of(t))
  end
  strings[key], expiries[key] = value, t
end

-- The value of the string key `key`, or nil.
local function get(key)
  local v = strings[key]
  if v == nil then
    v = redis.call('GET', key)
    strings[key] = v
  end
  return v or nil
end

-- `base`, or `base "#" n` if a member of that name is already in the sorted set `key` (the
-- same request granted twice within a microsecond still counts twice).
local function unique_member(key, base)
  local m, n = base, 1
  while redis.call('ZSCORE', key, m) do
    n = n + 1
    m = base .. '#' .. n
  end
  return m
end

-- ------------------------------------------------------------------------------- keys

-- A key part as its length, ":" and itself; memoized for the call (one identity, a few
-- routes and hashes are encoded over and over, and each Lua string made costs).
local encoded = {}
local function enc(s)
  local e = encoded[s]
  if not e then
    e = #s .. ':' .. s
    encoded[s] = e
  end
  return e
end
local K = {}
function K.procs() return P .. 'procs' end
function K.edge() return P .. 'edge' end
function K.inv() return P .. 'inv' end
function K.g(id) return P .. 'g|' .. enc(id) end
function K.gp(id) return P .. 'gp|' .. enc(id) end
function K.gl(id, c) return P .. 'gl|' .. enc(id) .. enc(c) end
function K.r(id, route) return P .. 'r|' .. enc(id) .. enc(route) end
function K.b(id, h, major) return P .. 'b|' .. enc(id) .. enc(h) .. enc(major) end
function K.bw(id, h) return P .. 'bw|' .. enc(id) .. enc(h) end
function K.bp(id, h, major) return P .. 'bp|' .. enc(id) .. enc(h) .. enc(major) end
function K.lr(id, route, major) return P .. 'lr|' .. enc(id) .. enc(route) .. enc(major) end
function K.lb(id, h, major) return P .. 'lb|' .. enc(id) .. enc(h) .. enc(major) end
function K.hr(id, route, major) return P .. 'hr|' .. enc(id) .. enc(route) .. enc(major) end
function K.hb(id, h, major) return P .. 'hb|' .. enc(id) .. enc(h) .. enc(major) end

-- The time stored in a hold-like key (value = until = its expiry), if it is still ahead.
local function until_of(key)
  local v = get(key)
  if not v then return nil end
  local t = tonumber(v)
  if t and t > now then return t end
  return nil
end

-- The bucket hash of a route: the learned mapping ("" = no bucket), else `known`.
local function hash_for(identity, route, known)
  local v = get(K.r(identity, route))
  if v then return v end
  return known
end

-- A learned, non-empty hash (what updates use when they name none).
local function learned_hash(identity, route)
  local v = get(K.r(identity, route))
  if v and v ~= '' then return v end
  return nil
end

-- ------------------------------------------------------------------------------- buckets

-- A bucket's state, read once per call: the table is the one `states` keeps, and whoever
-- writes the bucket's hash writes the same change into it (`write_state`).
local function bucket_state(key)
  local s = states[key]
  if s ~= nil then return s or nil end
  local v = redis.call('HMGET', key, 'limit', 'remaining', 'reported', 'reset_at', 'window',
    'window_start', 'provisional', 'margin', 'untimed')
  if not v[1] then
    states[key] = false
    return nil
  end
  s = {
    limit = tonumber(v[1]), remaining = tonumber(v[2]), reported = v[3] and tonumber(v[3]) or nil,
    reset_at = tonumber(v[4]), window = tonumber(v[5]), window_start = tonumber(v[6]),
    provisional = v[7] == '1', margin = tonumber(v[8]), untimed = v[9] == '1',
  }
  states[key] = s
  return s
end

local STATE_FIELDS = {'limit', 'remaining', 'reported', 'reset_at', 'window', 'window_start',
  'provisional', 'margin', 'untimed'}

-- Writes the fields of `changes` (name -> number, boolean, or false for none) into the bucket
-- `key`'s hash, in one HSET (and one HDEL for the fields that go), and into its state table
-- when this call knows it (or `changes` is a whole new state: every field but `reported` and
-- `untimed`).
local function write_state(key, changes)
  local s = states[key]
  local known = s
  if not s then
    s = {}
    states[key] = changes.limit and changes.margin and s or nil
  end
  local set, gone = {'HSET', key}, {'HDEL', key}
  -- a field to remove that this call knows is absent needs no HDEL
  local function drop(f)
    if not known or known[f] then gone[#gone + 1] = f end
  end
  for _, f in ipairs(STATE_FIELDS) do
    local v = changes[f]
    if v ~= nil then
      if f == 'provisional' or f == 'untimed' then
        if v then
          set[#set + 1] = f
          set[#set + 1] = '1'
        elseif f == 'provisional' then
          set[#set + 1] = f
          set[#set + 1] = '0'
        else
          drop(f)
        end
        s[f] = v
      elseif v == false then
        drop(f)
        s[f] = nil
      else
        set[#set + 1] = f
        set[#set + 1] = fmt(v)
        s[f] = v
      end
    end
  end
  if #set > 2 then redis.call(unpack(set)) end
  if #gone > 2 then
    expiries[key] = nil
    redis.call(unpack(gone))
  end
end

-- Unanswered grants of a bucket after dropping those that stopped counting. Once per call is
-- enough: every entry the script adds to a bucket's set counts past now, and now stands still.
local swept = {}
local function live_pending(bp)
  if not swept[bp] then
    zremrange(bp, '-inf', NOW)
    swept[bp] = true
  end
  return redis.call('ZCARD', bp)
end

-- Starts a new window if the bucket's has ended (or `force`), counting live unanswered grants
-- as carried; with `margin`, the bucket's margin is that from now on (written with the roll).
local function roll_if_due(b, bp, force, margin)
  local s = bucket_state(b)
  if not s or (now < s.reset_at and not force) then return end
  local carried = live_pending(bp)
  local remaining = s.limit - carried
  if remaining < 0 then remaining = 0 end
  local reset_at = now + s.window + (margin or s.margin)
  write_state(b, {window_start = now, remaining = remaining, reset_at = reset_at,
    provisional = true, reported = false, untimed = false, margin = margin})
  expire_at(b, reset_at + ttl)
end

-- A live unanswered grant of `member` in `bp`: its score, or nil.
local function live_entry(bp, member)
  local s = redis.call('ZSCORE', bp, member)
  if not s then return nil end
  s = tonumber(s)
  if s > now then return s end
  return nil
end

-- The grant may have been counted without a report: it keeps counting, as a ghost, until one
-- window (plus margin) after it was granted.
local function ghost(member, identity, major, h)
  local s = bucket_state(K.b(identity, h, major))
  if not s then return end
  local bp = K.bp(identity, h, major)
  local score = live_entry(bp, member)
  if not score then return end
  local old = expiry_of(bp)
  zrem(bp, member)
  local granted = score - lease
  local until_t = granted + s.window + s.margin
  if until_t > now then redis.call('ZADD', bp, fmt(until_t), member .. '~' .. fmt(granted)) end
  if redis.call('EXISTS', bp) == 1 then
    local t = until_t
    if old and old > t then t = old end
    expire_at(bp, t)
  end
end

-- What the bucket learned later (a longer window, a later reset) holds its ghosts too: each
-- counts until one window (plus margin) after its grant as the bucket knows them now, and one
-- granted in the current window at least until that window's reset.
local function extend_ghosts(identity, h, major)
  local s = bucket_state(K.b(identity, h, major))
  if not s then return end
  local bp = K.bp(identity, h, major)
  local entries = redis.call('ZRANGEBYSCORE', bp, '(' .. NOW, '+inf', 'WITHSCORES')
  local latest = nil
  for i = 1, #entries, 2 do
    local m, score = entries[i], tonumber(entries[i + 1])
    local g = m:match('~(%d+)$')
    if g then
      local granted = tonumber(g)
      local u = granted + s.window + s.margin
      if granted >= s.window_start and s.reset_at > u then u = s.reset_at end
      if u > score then
        redis.call('ZADD', bp, fmt(u), m)
        if latest == nil or u > latest then latest = u end
      end
    end
  end
  if latest then
    local old = expiry_of(bp)
    if old and old > latest then latest = old end
    expire_at(bp, latest)
  end
end

-- Deletes the pioneer locks `member` holds and, unless `reached`, its unanswered grant; returns
-- that grant's time, if there was one. `known`: the grant's live score if the caller has read
-- it in this call (false: none), else nil.
local function release(member, identity, route, major, h, reached, window, known)
  local lr = K.lr(identity, route, major)
  if get(lr) == member then del(lr) end
  if not h then return nil end
  local lb = K.lb(identity, h, major)
  if get(lb) == member then
    if reached and window and redis.call('EXISTS', K.b(identity, h, major)) == 0 then
      -- The pioneer of a known bucket without state may have been counted: the lock stays as
      -- a ghost no grant matches, for up to two windows, within the lease.
      local old = expiry_of(lb)
      redis.call('SET', lb, member .. '~', 'KEEPTTL')
      strings[lb] = member .. '~'
      local t = now + 2 * window
      if old and old < t then t = old end
      expire_at(lb, t)
    else
      del(lb)
    end
  end
  if reached then return nil end
  local bp = K.bp(identity, h, major)
  local score = known
  if score == nil then score = live_entry(bp, member) end
  if not score then return nil end
  zrem(bp, member)
  return score - lease
end

-- A grant that was never sent: its newest global entry goes, and its bucket slot comes back
-- if its window is still the current one.
local function give_back(member, identity, major, h, granted_at)
  local g = K.g(identity)
  local entries = redis.call('ZREVRANGE', g, 0, -1)
  local head = member .. ':'
  for _, m in ipairs(entries) do
    local rest = m:sub(#head + 1)
    if m:sub(1, #head) == head and (rest:match('^%d+$') or rest:match('^%d+#%d+$')) then
      zrem(g, m)
      break
    end
  end
  if h and granted_at then
    local b = K.b(identity, h, major)
    local s = bucket_state(b)
    if s and granted_at >= s.window_start and now < s.reset_at then
      local r = s.remaining + 1
      if r > s.limit then r = s.limit end
      write_state(b, {remaining = r})
    end
  end
end

-- ------------------------------------------------------------------------------- reserve

-- A list of ages (ns, decimal, separated by ","; "" or absent for none) as whole microseconds,
-- rounded down (so a stamp now - age errs later).
local function opt_ages(i, what)
  local s = arg(i)
  local out = {}
  if s == nil or s == '' then return out end
  for part in string.gmatch(s .. ',', '([^,]*),') do
    if not digits(part) then bad = bad or (what .. ' must be decimal integers of nanoseconds separated by ","') return {} end
    local n = tonumber(part)
    if n >= 9007199254740992 then out[#out + 1] = MAX_US else out[#out + 1] = math.min(floor_div(n, 1000), MAX_US) end
  end
  return out
end

-- What `client` reports it sent of `identity`'s global budget that the store may not count:
-- its earlier report of this kind (tag "u": unrecorded, "g": granted) is replaced by this one,
-- one member per send, client "!" tag k (k from 1), score now - age (at least 0).
local function count_report(g, tag, ages, gw)
  if #ages == 0 then return end
  local head = client .. '!' .. tag
  local old = expiry_of(g)
  for _, m in ipairs(redis.call('ZRANGE', g, 0, -1)) do
    if m:sub(1, #head) == head and m:sub(#head + 1):match('^%d+$') then zrem(g, m) end
  end
  local add = {'ZADD', g}
  for k, age in ipairs(ages) do
    local at = now - age
    if at < 0 then at = 0 end
    add[#add + 1] = fmt(at)
    add[#add + 1] = head .. k
  end
  redis.call(unpack(add))
  local t = now + gw
  if old and old > t then t = old end
  expire_at(g, t)
end

-- Whether a reservation of this call has put its client in `procs` at `now` (see step 0), and
-- the live-process counts it has read since, by `processes_since` ("all" for none).
local procs_stamped, procs_counts = false, {}

local function reserve()
  local id = need_str(7, 'id')
  local identity = need_str(8, 'identity')
  local route = need_str(9, 'route')
  local major = need_str(10, 'major')
  local known = opt_str(11, 'bucket')
  local counts_global = need_flag(12, 'counts_global')
  local global_limit = need_int(13, 'global_limit')
  local gw = need_us(14, 'global_window_ns')
  local margin = need_us(15, 'margin_ns')
  local invalid_limit = need_int(16, 'invalid_limit')
  local iw = need_us(17, 'invalid_window_ns')
  -- [18] global_want: absent (a caller of an earlier version) or "" is 1.
  local want = 1
  if arg(18) ~= nil and arg(18) ~= '' then want = need_int(18, 'global_want') end
  -- [19..22], after an outage; absent from a caller of an earlier version.
  local since = nil
  if arg(19) ~= nil and arg(19) ~= '' then
    since = need_int(19, 'processes_since_ns')
    if since >= 9007199254740992 then since = MAX_US else since = math.min(floor_div(since, 1000), MAX_US) end
  end
  local reporting = false
  if arg(20) ~= nil and arg(20) ~= '' then reporting = need_flag(20, 'reporting') end
  local unrecorded = opt_ages(21, 'unrecorded_ns')
  local granted = opt_ages(22, 'granted_ns')
  if bad then return arg_error(bad) end
  if want < 0 then want = 1 end
  local member = client .. ':' .. id
  -- 0. live processes, reported with every answer (a process still reporting what it sent
  -- during an outage is not counted back yet); then what it reports, whatever the answer
  local procs = K.procs()
  local known_client, processes
  local count_key = since or 'all'
  if procs_stamped and not reporting then
    -- An earlier reservation of this call (one client, one `now`) did all of this already:
    -- the client is in `procs` at now, nothing older than the lease is left, and nothing in
    -- this call changes `procs` again. Only the count for this `since` may be new.
    known_client = true
    processes = procs_counts[count_key]
  else
    local seen = redis.call('ZSCORE', procs, client)
    known_client = seen ~= false and seen ~= nil and tonumber(seen) > now - lease
    zremrange(procs, '-inf', fmt(now - lease))
    if not reporting then
      redis.call('ZADD', procs, NOW, client)
      expire_at(procs, now + lease)
      procs_stamped = true
      procs_counts = {}
    end
  end
  if processes == nil then
    if since then
      processes = redis.call('ZCOUNT', procs, fmt(now - since), '+inf')
    else
      processes = redis.call('ZCARD', procs)
    end
    if procs_stamped then procs_counts[count_key] = processes end
  end
  if global_limit > 0 then
    count_report(K.g(identity), 'u', unrecorded, gw)
    if not known_client then count_report(K.g(identity), 'g', granted, gw) end
  end
  local function deny(until_t, scope) return {'denied', until_t - now, scope, processes} end

  -- 1. edge
  local t = until_of(K.edge())
  if t then return deny(t, 'edge') end
  -- 2. invalid budget
  if invalid_limit > 0 then
    local inv = K.inv()
    if redis.call('EXISTS', inv) == 1 then
      zremrange(inv, '-inf', fmt(now - iw))
      local n = redis.call('ZCARD', inv)
      if n >= invalid_limit then
        local e = redis.call('ZRANGE', inv, n - invalid_limit, n - invalid_limit, 'WITHSCORES')
        return deny(tonumber(e[2]) + iw, 'invalid')
      end
    end
  end
  -- 3. global
  local g = K.g(identity)
  local room = global_limit
  local spend = nil
  local gl = K.gl(identity, client)
  if counts_global then
    t = until_of(K.gp(identity))
    if t then return deny(t, 'global') end
    if want == 0 and global_limit > 0 then
      -- The oldest token leased to this client that still counts in the window.
      while true do
        local first = redis.call('ZRANGE', gl, 0, 0)[1]
        if not first then break end
        local sc = redis.call('ZSCORE', g, first)
        if sc and tonumber(sc) > now - gw then
          spend = first
          break
        end
        zrem(gl, first)
      end
    end
    if global_limit > 0 and spend == nil and redis.call('EXISTS', g) == 1 then
      zremrange(g, '-inf', fmt(now - 2 * gw))
      local card = redis.call('ZCARD', g)
      local old = redis.call('ZCOUNT', g, '-inf', fmt(now - gw))
      if card - old >= global_limit then
        local e = redis.call('ZRANGE', g, card - global_limit, card - global_limit, 'WITHSCORES')
        return deny(tonumber(e[2]) + gw, 'global')
      end
      room = global_limit - (card - old)
    end
  end
  -- 4. route hold
  t = until_of(K.hr(identity, route, major))
  if t then return deny(t, 'route') end
  -- 5. bucket, 6. pioneer lock
  local take, key, locks = nil, nil, nil
  local h = hash_for(identity, route, known)
  if h == '' then
    take = 'nothing'
  elseif h then
    t = until_of(K.hb(identity, h, major))
    if t then return deny(t, 'bucket') end
    local b = K.b(identity, h, major)
    local s = bucket_state(b)
    if s then
      local bp = K.bp(identity, h, major)
      if now >= s.reset_at then
        -- (before its end nothing below changes the bucket's state: no second read)
        roll_if_due(b, bp, false, margin)
      end
      local unanswered = live_pending(bp)
      local available = s.remaining
      if s.reported then
        available = s.reported - unanswered
        if available < 0 then available = 0 end
      end
      if available == 0 then
        local until_t = s.reset_at
        if until_t < now + 1 then until_t = now + 1 end
        return deny(until_t, 'bucket')
      end
      take, key = 'slot', h
    else
      -- one pioneer per bucket and major, and per route and major: another process may be
      -- probing this route without knowing its bucket
      locks = {K.lb(identity, h, major), K.lr(identity, route, major)}
      take = 'lock'
    end
  else
    locks = {K.lr(identity, route, major)}
    take = 'lock'
  end
  if take == 'lock' then
    for _, lk in ipairs(locks) do
      local holder = get(lk)
      if holder and holder ~= member then
        local until_t = now + poll
        local e = expiry_of(lk)
        if e and e < until_t then until_t = e end
        return deny(until_t, 'pioneer')
      end
    end
  end
  -- 7. commit
  local leased = 0
  if spend then
    -- A leased token is spent: it counts from now, like a grant of this moment.
    zrem(gl, spend)
    redis.call('ZADD', g, NOW, spend)
    expire_at(g, now + gw)
  elseif counts_global and global_limit > 0 then
    -- This request's token, and the lease: as many more as it asks for and the window has
    -- room for, each its own member (member "+" i ":" now, never matched by a release).
    leased = math.min(want, room) - 1
    if leased < 0 then leased = 0 end
    local names = {member .. ':' .. NOW}
    for i = 1, leased do names[i + 1] = member .. '+' .. i .. ':' .. NOW end
    -- one ZMSCORE for all of them; a name already taken is made unique one at a time
    local taken = redis.call('ZMSCORE', g, unpack(names))
    local add = {'ZADD', g}
    local lease_add = {'ZADD', gl}
    for i, m in ipairs(names) do
      if taken[i] then m = unique_member(g, m) end
      add[#add + 1] = NOW
      add[#add + 1] = m
      if i > 1 then
        lease_add[#lease_add + 1] = NOW
        lease_add[#lease_add + 1] = m
      end
    end
    redis.call(unpack(add))
    expire_at(g, now + gw)
    if leased > 0 then
      redis.call(unpack(lease_add))
      expire_at(gl, now + gw)
    end
  end
  local lease_end = now + lease
  if take == 'slot' then
    -- (the state read at step 5, kept for the call: steps 6 and 7 do not touch the bucket)
    local b = K.b(identity, key, major)
    local s = bucket_state(b)
    local r = s.remaining - 1
    if r < 0 then r = 0 end
    write_state(b, {remaining = r})
    expire_at(b, s.reset_at + ttl)
    local bp = K.bp(identity, key, major)
    local old = expiry_of(bp)
    redis.call('ZADD', bp, fmt(lease_end), member)
    local e = lease_end
    if old and old > e then e = old end
    expire_at(bp, e)
  elseif take == 'lock' then
    for _, lk in ipairs(locks) do set_until(lk, member, lease_end) end
  end
  return {'granted', processes, leased, now}
end

-- ------------------------------------------------------------------------------- record

local function record_bucket()
  local id = need_str(8, 'id')
  local identity = need_str(9, 'identity')
  local route = need_str(10, 'route')
  local major = need_str(11, 'major')
  local bucket = opt_str(12, 'bucket')
  local unlimited = need_flag(13, 'unlimited')
  local limit = opt_int(14, 'limit')
  local remaining = opt_int(15, 'remaining')
  local reset_after = opt_us(16, 'reset_after_ns')
  local window = opt_us(17, 'window_ns')
  if bad then return arg_error(bad) end
  local member = client .. ':' .. id
  local h = bucket or learned_hash(identity, route)
  -- 1. the route's mapping
  local r = K.r(identity, route)
  if bucket then
    set_until(r, bucket, now + ttl)
  elseif unlimited then
    set_until(r, '', now + ttl)
  end
  local b, bp
  local later = false
  local score = nil
  if h then
    b, bp = K.b(identity, h, major), K.bp(identity, h, major)
    -- 2. a window that has ended rolls first, counting this request as still unanswered; so
    -- does one this answer shows to be over at the server: its request left after its grant,
    -- so its window ends at least reset_after after the grant, and if that is later than
    -- every end this window was told, it reached the server after all their requests
    if remaining and reset_after then
      local s = bucket_state(b)
      score = live_entry(bp, member) or false
      if s and score and not s.provisional and not s.untimed
          and score - lease + reset_after > s.reset_at + report_rounding then
        later = true
      end
    end
    roll_if_due(b, bp, later)
  end
  -- 3. locks and the unanswered grant
  local informative = limit ~= nil or remaining ~= nil or reset_after ~= nil
  -- (the live grant read at step 2, if it was: rolling only drops grants that stopped counting)
  local granted_at = release(member, identity, route, major, h, not informative, window, score)
  if not h then return {'recorded'} end
  -- the longest window any major of this hash reported: one hash, one window
  local bw = K.bw(identity, h)
  local hash_window = tonumber(get(bw) or '0')
  if not informative then
    -- 4. the hash's window first: the ghost counts for as long
    local st = bucket_state(b)
    if st and st.window < hash_window then write_state(b, {window = hash_window}) end
    ghost(member, identity, major, h)
    extend_ghosts(identity, h, major)
    return {'recorded'}
  end
  local pending = live_pending(bp)
  local final_window
  local t_r = nil
  if reset_after then t_r = now + reset_after end
  local s = bucket_state(b)
  if not s then
    -- a new bucket
    local l = limit
    if not l and remaining then l = remaining + 1 end
    if not l then l = 1 end
    if l < 1 then l = 1 end
    local rem = remaining
    if not rem then rem = l - 1 end
    rem = rem - pending
    if rem < 0 then rem = 0 end
    local w = window or 0
    if reset_after and reset_after > w then w = reset_after end
    if hash_window > w then w = hash_window end
    if w == 0 then w = 1000000 end
    local reset_at = t_r or (now + w)
    write_state(b, {limit = l, remaining = rem, reset_at = reset_at, window = w,
      window_start = now, provisional = not t_r, margin = 0, reported = remaining,
      untimed = (remaining and not t_r) or nil})
    expire_at(b, reset_at + ttl)
    final_window = w
  else
    -- merge into the current window (rolled in step 2), written in one HSET
    local m = {limit = s.limit, window = s.window, reset_at = s.reset_at,
      provisional = s.provisional, reported = s.reported}
    if limit then
      local l = limit
      if l < 1 then l = 1 end
      m.limit = l
    end
    if window and window > m.window then m.window = window end
    if hash_window > m.window then m.window = hash_window end
    -- (the answer that rolled the window in step 2 is its first)
    local carried = nil
    if granted_at ~= nil and granted_at < s.window_start and not later then carried = granted_at end
    local stale = carried ~= nil or (t_r ~= nil and t_r <= s.window_start)
    if not stale then
      if remaining then
        if m.reported == nil or remaining < m.reported then m.reported = remaining end
        if not t_r then m.untimed = true end
      end
      if t_r then
        if reset_after > m.window then m.window = reset_after end
        if m.provisional or t_r > m.reset_at then m.reset_at = t_r end
        m.provisional = false
      end
    end
    write_state(b, m)
    expire_at(b, s.reset_at + ttl)
    final_window = s.window
    -- a grant carried over from the previous window may have been counted in this one (after
    -- its lowest report, or before any): it keeps counting as a ghost, one window (plus
    -- margin) after its grant, like a 5xx's.
    if carried then
      local until_t = carried + s.window + s.margin
      if until_t > now then
        local old = expiry_of(bp)
        redis.call('ZADD', bp, fmt(until_t), member .. '~' .. fmt(carried))
        local t = until_t
        if old and old > t then t = old end
        expire_at(bp, t)
        pending = pending + 1
      end
    end
  end
  -- the hash's window is the longest of its majors'
  if hash_window > final_window then final_window = hash_window end
  set_until(bw, fmt(final_window), now + ttl)
  -- (a bucket without unanswered grants has no ghosts to extend)
  if pending > 0 then extend_ghosts(identity, h, major) end
  return {'recorded'}
end

local function record_release()
  local id = need_str(8, 'id')
  local identity = need_str(9, 'identity')
  local route = need_str(10, 'route')
  local major = need_str(11, 'major')
  local bucket = opt_str(12, 'bucket')
  local reached = need_flag(13, 'reached')
  local window = opt_us(14, 'window_ns')
  if bad then return arg_error(bad) end
  local member = client .. ':' .. id
  local h = bucket or learned_hash(identity, route)
  if reached and h then roll_if_due(K.b(identity, h, major), K.bp(identity, h, major)) end
  local granted_at = release(member, identity, route, major, h, reached, window)
  if not reached then
    give_back(member, identity, major, h, granted_at)
  elseif h then
    ghost(member, identity, major, h)
    extend_ghosts(identity, h, major)
  end
  return {'recorded'}
end

local function record_hold()
  local scope = need_str(8, 'scope')
  local identity = need_str(9, 'identity')
  local route = need_str(10, 'route')
  local major = need_str(11, 'major')
  local bucket = opt_str(12, 'bucket')
  local retry_after = need_us(13, 'retry_after_ns')
  if bad then return arg_error(bad) end
  local key
  if scope == 'edge' then
    key = K.edge()
  elseif scope == 'global' then
    key = K.gp(identity)
  elseif scope == 'route' or scope == 'bucket' then
    local h = bucket or learned_hash(identity, route)
    if scope == 'bucket' and h then key = K.hb(identity, h, major) else key = K.hr(identity, route, major) end
  elseif scope == 'invalid' or scope == 'pioneer' then
    return {'recorded'}
  else
    return arg_error('scope must be edge, invalid, global, route, bucket or pioneer')
  end
  local t = now + retry_after
  local old = until_of(key)
  if old and old > t then t = old end
  if t > now then set_until(key, fmt(t), t) end
  return {'recorded'}
end

local function record_invalid()
  local id = need_str(8, 'id')
  local window = need_us(9, 'window_ns')
  if bad then return arg_error(bad) end
  local inv = K.inv()
  -- One member per invalid response: its time, client and id (made unique if repeated).
  redis.call('ZADD', inv, NOW, unique_member(inv, NOW .. ':' .. client .. ':' .. id))
  expire_at(inv, now + window)
  return {'recorded'}
end

-- One operation, its arguments at [7..] as `arg` sees them.
local function run(item_op)
  bad = nil
  if item_op == 'reserve' then return reserve() end
  if item_op ~= 'record' then return arg_error('op must be "reserve" or "record"') end
  local kind = arg(7)
  if kind == 'bucket' then return record_bucket() end
  if kind == 'release' then return record_release() end
  if kind == 'hold' then return record_hold() end
  if kind == 'invalid' then return record_invalid() end
  return arg_error('record: the update must be bucket, release, hold or invalid')
end

if op ~= 'batch' then return run(op) end

-- "batch": the operations in order, each as its own call would run it; one reply each, in
-- order. An item that is refused (a bad argument: nothing of it written) answers
-- {"error", message} in its place, and the items after it still run.
local replies = {}
local p = 7
while p <= #ARGV do
  local n = tonumber(ARGV[p])
  if not digits(ARGV[p]) or n < 1 or p + n > #ARGV then
    return arg_error('batch: item at ARGV[' .. p .. '] must start with its argument count (>= 1, op included)')
  end
  -- The item's op is at p + 1 and its arguments from p + 2: a single call's [7] and on.
  shift, last = p - 5, 6 + n - 1
  local reply = run(ARGV[p + 1])
  if type(reply) == 'table' and reply.err then reply = {'error', reply.err} end
  replies[#replies + 1] = reply
  p = p + 1 + n
end
return replies
