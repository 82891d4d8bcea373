-- Helpers shared by every herald script. This file and the lib_*.lua files
-- head the library the scripts are functions of (see scripts.go), so each
-- helper is made once, when the library is loaded. Conversation keys are
-- built here from the prefix and the conversation's tag because Claim
-- learns the conversation only inside the script.

-- The turn queue's lanes, 0 (first served) to LANES-1.
local LANES = 6

-- now_ms is the store's clock: the caller's time when it sends one (a
-- test's fake clock), else the Redis server's, so that every lease is
-- judged by one clock.
local function now_ms(arg)
  if arg ~= nil and arg ~= '' then
    return tonumber(arg)
  end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- The small numbers a script reads and writes most (counts, lanes) have
-- their strings in tables, both ways: tonumber parses every string with
-- strtod, and string.format makes a string through sprintf.
local SMALL, SMALL_S = {}, {}
for i = 0, 64 do
  local s = i .. ''
  SMALL[s], SMALL_S[i] = i, s
end

-- int formats a number without an exponent, for ids and stored times.
-- Numbers go to redis.call as strings (int's, or literals such as '0'):
-- a Lua number given to redis.call, or joined to a string with .., is
-- formatted as a float, which costs more than int's '%d' does.
local function int(n)
  return SMALL_S[n] or string.format('%d', n)
end

-- small reads a count from a hash field or an argument. A missing field
-- (false) is 0.
local function small(s)
  return SMALL[s] or tonumber(s) or 0
end

local function conv_key(prefix, tag, suffix)
  return prefix .. '{' .. tag .. '}:' .. suffix
end

-- shard_id makes an id the script made (from a counter of its shard)
-- name its shard: "<label>_<id>" when the prefix is a shard's,
-- "P{label}:", else the id as it is (the layout of one server; see
-- shards.go).
local function shard_id(prefix, id)
  local label = string.match(prefix, '{([^}]*)}:$')
  if label then
    return label .. '_' .. id
  end
  return id
end

local function lane_key(prefix, tag, lane)
  return conv_key(prefix, tag, 'q' .. lane)
end

-- remember_once records id under a dedupe key, unless the key holds an
-- earlier id still inside its window: then it returns that id and records
-- nothing. The value is "id|until_ms"; the key's own TTL only collects
-- garbage, and whether it still counts is decided by the store's clock, so
-- a fake clock moves the dedupe window too. The common case is one call.
-- The window is in ms, as the script's argument gives it (a string).
local function remember_once(key, id, now, window)
  local v = id .. '|' .. int(now + tonumber(window))
  local old = redis.call('SET', key, v, 'NX', 'GET', 'PX', window)
  if not old then
    return nil
  end
  local first, until_ms = string.match(old, '^(.*)|(%d+)$')
  if first and tonumber(until_ms) > now then
    return first
  end
  redis.call('SET', key, v, 'PX', window)
  return nil
end

-- call_all runs cmd on key (on none when key is nil, as DEL takes only
-- keys) with args[from .. from+n-1], in chunks so a long batch never
-- exceeds Lua's stack for unpack: one command for a batch rather than one
-- per item, as each call inside a script costs about as much as a small
-- command. A chunk is an even number of args, so score/member pairs stay
-- together. It returns the last command's reply
-- and, for a command that answers a count (ZREM), the counts' sum.
local function call_all(cmd, key, args, from, n)
  local i = from
  local last = from + n - 1
  local reply, total = nil, 0
  while i <= last do
    local j = math.min(i + 999, last)
    if key then
      reply = redis.call(cmd, key, unpack(args, i, j))
    else
      reply = redis.call(cmd, unpack(args, i, j))
    end
    if type(reply) == 'number' then
      total = total + reply
    end
    i = j + 1
  end
  return reply, total
end

-- WRITE_OPS are the commands another domain's write may run inside a
-- turn's commit (finish): writes of data, never of the server. A domain
-- whose write must look before it writes (a compare and set) adds its
-- own op here as a function of the op's arguments (lib_controllers.lua).
local WRITE_OPS = {
  HSET = true, HDEL = true, HINCRBY = true, SET = true, DEL = true,
  ZADD = true, ZREM = true, SADD = true, SREM = true, RPUSH = true,
  XADD = true, PEXPIRE = true,
}

-- check_write_ops refuses, before anything is written, write commands
-- (args[at], the count, then per command its name, n, the index of the
-- argument to replace with the time and n arguments: appendOps in
-- writes.go) that are not all in WRITE_OPS. It returns an error reply,
-- or nil when all are allowed. run_write_ops then runs them, with now
-- (ms) in each argument a command names. finish runs a turn's writes
-- with them, and dlg_create the same commands outside a turn.
local function check_write_ops(args, at)
  local wo = at + 1
  for _ = 1, small(args[at]) do
    if not WRITE_OPS[args[wo]] then
      return redis.error_reply('write command ' .. tostring(args[wo]) .. ' is not allowed')
    end
    wo = wo + 3 + small(args[wo + 1])
  end
  return nil
end

local function run_write_ops(args, at, now)
  local wo = at + 1
  for _ = 1, small(args[at]) do
    local cmd, n, tat = args[wo], small(args[wo + 1]), small(args[wo + 2])
    local wargs = {}
    for i = 1, n do
      wargs[i] = args[wo + 2 + i]
    end
    if tat > 0 then
      wargs[tat] = int(now)
    end
    local f = WRITE_OPS[cmd]
    if f == true then
      redis.call(cmd, unpack(wargs))
    else
      f(wargs)
    end
    wo = wo + 3 + n
  end
end
