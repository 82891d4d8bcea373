-- Helpers shared by every herald script. This file is put in front of each
-- script before it is loaded, so each script is one self-contained EVALSHA.
-- Conversation keys are built here from the prefix and the conversation's
-- tag because Claim learns the conversation only inside the script.

-- The turn queue's consumer group and its only consumer: the lease makes
-- one holder per conversation, so one consumer name is enough and its
-- pending entries list holds the entry delivered and not yet acked.
local GROUP = 'g'
local CONSUMER = 'c'
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

-- int formats a number without an exponent, for ids and stored times.
local function int(n)
  return string.format('%d', n)
end

local function conv_key(prefix, tag, suffix)
  return prefix .. '{' .. tag .. '}:' .. suffix
end

local function lane_key(prefix, tag, lane)
  return conv_key(prefix, tag, 'q' .. lane)
end

-- seen reads a dedupe key whose value is "id|until_ms". The key's own TTL
-- only collects garbage; whether it still counts is decided by the store's
-- clock, so a fake clock moves the dedupe window too.
local function seen(key, now)
  local v = redis.call('GET', key)
  if not v then
    return nil
  end
  local id, until_ms = string.match(v, '^(.*)|(%d+)$')
  if id and tonumber(until_ms) > now then
    return id
  end
  return nil
end

local function remember(key, id, now, window)
  redis.call('SET', key, id .. '|' .. int(now + window), 'PX', window)
end

-- leased reports whether the conversation has a lease that has not expired.
local function leased(state, now)
  local v = redis.call('HMGET', state, 'token', 'exp')
  return v[1] and tonumber(v[2] or 0) > now
end

-- lease_ok reports whether token is the conversation's current lease.
-- An expired lease nobody has taken over is still current: the token, not
-- the clock, is what keeps a stale holder from writing.
local function lease_ok(state, token)
  return redis.call('HGET', state, 'token') == token
end

local function has_work(prefix, tag)
  for lane = 0, LANES - 1 do
    if redis.call('XLEN', lane_key(prefix, tag, lane)) > 0 then
      return true
    end
  end
  return false
end

-- entry_reply turns a stream entry {id, {field, value, …}} into
-- {id, data, enqueued_ms, deliveries}.
local function entry_reply(e, deliveries)
  local data, at = '', 0
  local f = e[2]
  for i = 1, #f, 2 do
    if f[i] == 'd' then
      data = f[i + 1]
    elseif f[i] == 'at' then
      at = tonumber(f[i + 1])
    end
  end
  return {e[1], data, at, deliveries}
end

-- next_entry hands the holder its next entry: the one delivered before and
-- never acked first (its delivery count goes up), else the oldest entry of
-- the lowest non-empty lane. It returns nil when the queue is empty.
local function next_entry(prefix, tag, state)
  local pend = redis.call('HGET', state, 'pend')
  if pend then
    local key = lane_key(prefix, tag, string.match(pend, '%-(%d+)$'))
    local got = redis.call('XCLAIM', key, GROUP, CONSUMER, 0, pend)
    if got[1] then
      local p = redis.call('XPENDING', key, GROUP, pend, pend, 1)
      return entry_reply(got[1], p[1][4])
    end
    redis.call('HDEL', state, 'pend')
  end
  for lane = 0, LANES - 1 do
    local key = lane_key(prefix, tag, lane)
    if redis.call('XLEN', key) > 0 then
      local r = redis.call('XREADGROUP', 'GROUP', GROUP, CONSUMER, 'COUNT', 1, 'STREAMS', key, '>')
      if r and r[1] and r[1][2][1] then
        local e = r[1][2][1]
        redis.call('HSET', state, 'pend', e[1])
        return entry_reply(e, 1)
      end
    end
  end
  return nil
end

-- grant leases the conversation to worker and returns the new token and
-- expiry. The fence only ever increases, so every grant's token is new.
local function grant(state, ready, leases, tag, worker, ttl, now)
  local token = redis.call('HINCRBY', state, 'fence', 1)
  local exp = now + ttl
  redis.call('HSET', state, 'worker', worker, 'token', token, 'exp', int(exp))
  redis.call('ZADD', leases, exp, tag)
  redis.call('ZREM', ready, tag)
  return token, exp
end

-- release ends the lease; a conversation with entries left is ready again,
-- behind the ones already waiting.
local function release(prefix, tag, state, ready, leases, now)
  redis.call('HDEL', state, 'worker', 'token', 'exp')
  redis.call('ZREM', leases, tag)
  if has_work(prefix, tag) then
    redis.call('ZADD', ready, now, tag)
  else
    redis.call('ZREM', ready, tag)
  end
end

-- push_all appends ARGV[from .. from+n-1] to a list, in chunks so a long
-- batch never exceeds Lua's stack for unpack.
local function push_all(key, from, n)
  local i = from
  local last = from + n - 1
  while i <= last do
    local j = math.min(i + 999, last)
    redis.call('RPUSH', key, unpack(ARGV, i, j))
    i = j + 1
  end
end

local function ob_key(prefix, suffix)
  return prefix .. 'ob:' .. suffix
end

-- ob_enqueue adds one outbox message and returns its id and 1 when its
-- idempotency key was seen within the window (nothing added), else 0.
-- Ids are zero-padded so that messages due in the same millisecond sort
-- in the order they were enqueued.
local function ob_enqueue(prefix, data, platform, idem, next_at, now, window)
  local ikey
  if idem ~= '' then
    ikey = ob_key(prefix, 'idem:' .. idem)
    local id = seen(ikey, now)
    if id then
      return id, 1
    end
  end
  local seq = redis.call('INCR', ob_key(prefix, 'seq'))
  local id = string.format('%012d', seq)
  local due = now
  if next_at ~= '' then
    due = tonumber(next_at)
  end
  redis.call('HSET', ob_key(prefix, 'm:' .. id),
    'd', data, 'p', platform, 'n', 0, 'next', int(due), 'at', int(now), 'e', '')
  redis.call('ZADD', ob_key(prefix, 'due:' .. platform), due, id)
  redis.call('ZADD', ob_key(prefix, 'all'), seq, id)
  if ikey then
    remember(ikey, id, now, window)
  end
  return id, 0
end

-- ob_check is the guard of every write under an outbox claim.
local function ob_check(mkey, token)
  local v = redis.call('HMGET', mkey, 'p', 'tok')
  if not v[1] then
    return nil, 'NOTFOUND'
  end
  if v[2] ~= token then
    return nil, 'LOST'
  end
  return v[1], nil
end

-- ---- script body follows ----
