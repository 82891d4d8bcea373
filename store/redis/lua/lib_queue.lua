-- Helpers of the turn-queue scripts: conversation state, lease and delivery.

-- A conversation's state hash holds, besides the lease, a count of
-- entries per lane (n0 … n5, queued and delivered-unacked alike), so one
-- HMGET tells whether the conversation has work and which lane to read.
-- groups lists the lanes whose stream has its consumer group, so an append
-- need not ask. Ended leases and acked entries leave '' behind rather than
-- a deleted field, so one HSET can write all of a step's changes.
local function load_state(state)
  local v = redis.call('HMGET', state, 'token', 'exp', 'pend', 'fence', 'seq', 'worker', 'groups',
    'n0', 'n1', 'n2', 'n3', 'n4', 'n5')
  local n = {
    [0] = tonumber(v[8]) or 0,
    tonumber(v[9]) or 0,
    tonumber(v[10]) or 0,
    tonumber(v[11]) or 0,
    tonumber(v[12]) or 0,
    tonumber(v[13]) or 0,
  }
  return {
    token = v[1] ~= '' and v[1] or nil,
    exp = tonumber(v[2]) or 0,
    pend = v[3] ~= '' and v[3] or nil,
    fence = tonumber(v[4]) or 0,
    seq = tonumber(v[5]) or 0,
    worker = v[6],
    groups = v[7] or '',
    n = n,
    work = n[0] + n[1] + n[2] + n[3] + n[4] + n[5],
  }
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
-- holder finished); Claim drops it there, which saves a call here. now is
-- a function, so the time is read only when it is needed.
local function release(tag, state, ready, leases, now, work, ...)
  redis.call('HSET', state, 'worker', '', 'token', '', 'exp', '', ...)
  redis.call('ZREM', leases, tag)
  if work > 0 then
    redis.call('ZADD', ready, now(), tag)
  end
end
