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

-- remember_once records id under a dedupe key, unless the key holds an
-- earlier id still inside its window: then it returns that id and records
-- nothing. The value is "id|until_ms"; the key's own TTL only collects
-- garbage, and whether it still counts is decided by the store's clock, so
-- a fake clock moves the dedupe window too. The common case is one call.
local function remember_once(key, id, now, window)
  local v = id .. '|' .. int(now + window)
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

-- A conversation's state hash holds, besides the lease, a count of
-- entries per lane (n0 … n5, queued and delivered-unacked alike), so one
-- HMGET tells whether the conversation has work and which lane to read.
-- groups lists the lanes whose stream has its consumer group, so an append
-- need not ask.
local STATE_FIELDS = {'token', 'exp', 'pend', 'fence', 'seq', 'worker', 'groups', 'n0', 'n1', 'n2', 'n3', 'n4', 'n5'}

local function load_state(state)
  local v = redis.call('HMGET', state, unpack(STATE_FIELDS))
  -- Ended leases and acked entries leave '' behind rather than a deleted
  -- field, so one HSET can write all of a step's changes.
  local st = {
    token = v[1] ~= '' and v[1] or nil,
    exp = tonumber(v[2] or 0) or 0,
    pend = v[3] ~= '' and v[3] or nil,
    fence = tonumber(v[4] or 0),
    seq = tonumber(v[5] or 0),
    worker = v[6],
    groups = v[7] or '',
    n = {},
    work = 0,
  }
  for lane = 0, LANES - 1 do
    local c = tonumber(v[8 + lane] or 0)
    st.n[lane] = c
    st.work = st.work + c
  end
  return st
end

-- leased reports whether the conversation has a lease that has not expired.
local function leased(st, now)
  return st.token and st.exp > now
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

-- lane_of reads the lane from an entry id "<seq>-<lane>", or nil.
local function lane_of(id)
  local lane = string.match(id, '^%d+%-(%d)$')
  if lane then
    return tonumber(lane)
  end
  return nil
end

-- next_entry finds the holder's next entry: the one delivered before and
-- never acked first (its delivery count goes up), else the oldest entry of
-- the lowest non-empty lane. It returns the entry (nil when the queue is
-- empty) and, when a new entry was delivered, its id, which the caller
-- stores as pend with its other state writes.
local function next_entry(prefix, tag, state, st)
  if st.pend then
    local key = lane_key(prefix, tag, lane_of(st.pend) or 0)
    local got = redis.call('XCLAIM', key, GROUP, CONSUMER, 0, st.pend)
    if got[1] then
      local p = redis.call('XPENDING', key, GROUP, st.pend, st.pend, 1)
      return entry_reply(got[1], p[1][4]), nil
    end
    redis.call('HSET', state, 'pend', '')
    st.pend = nil
  end
  for lane = 0, LANES - 1 do
    if st.n[lane] > 0 then
      local key = lane_key(prefix, tag, lane)
      local r = redis.pcall('XREADGROUP', 'GROUP', GROUP, CONSUMER, 'COUNT', 1, 'STREAMS', key, '>')
      if type(r) == 'table' and r.err then
        -- The stream lost its group (deleted by hand): make it again from
        -- the start rather than fail every Claim that meets it.
        redis.pcall('XGROUP', 'CREATE', key, GROUP, '0', 'MKSTREAM')
        r = redis.call('XREADGROUP', 'GROUP', GROUP, CONSUMER, 'COUNT', 1, 'STREAMS', key, '>')
      end
      if r and r[1] and r[1][2][1] then
        local e = r[1][2][1]
        return entry_reply(e, 1), e[1]
      end
    end
  end
  return nil, nil
end

-- release ends the lease; a conversation with work left is ready again,
-- behind the ones already waiting. The caller's other state changes (an
-- acked entry's count) ride along in the same HSET. A conversation without
-- work may still sit in ready (its lease expired and was swept while the
-- holder finished); Claim drops it there, which saves a call here.
local function release(tag, state, ready, leases, now, work, ...)
  redis.call('HSET', state, 'worker', '', 'token', '', 'exp', '', ...)
  redis.call('ZREM', leases, tag)
  if work > 0 then
    redis.call('ZADD', ready, now, tag)
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
  local seq = redis.call('INCR', ob_key(prefix, 'seq'))
  local id = string.format('%012d', seq)
  if idem ~= '' then
    local first = remember_once(ob_key(prefix, 'idem:' .. idem), id, now, window)
    if first then
      return first, 1
    end
  end
  local due = now
  if next_at ~= '' then
    due = tonumber(next_at)
  end
  redis.call('HSET', ob_key(prefix, 'm:' .. id),
    'd', data, 'p', platform, 'n', 0, 'next', int(due), 'at', int(now), 'e', '')
  redis.call('ZADD', ob_key(prefix, 'due:' .. platform), due, id)
  redis.call('ZADD', ob_key(prefix, 'all'), seq, id)
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
