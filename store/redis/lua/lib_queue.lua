-- Helpers of the turn-queue scripts: conversation state, lease and delivery.

-- A conversation's state hash (see doc.go) keeps, beside the lease, a
-- count of entries per lane (n0 … n5, queued and delivered-unacked alike)
-- and the lanes whose count is above zero (lanes, a digit per lane, in no
-- order), so that a script learns from one HMGET whether the
-- conversation has work and where, and reads a count only to change it.
-- Each script reads only the fields it uses and turns into numbers only
-- those it computes with: inside a script, every field read and every
-- number parsed costs a good part of what a small command does. Ended
-- leases and acked entries leave '' behind rather than a deleted field, so
-- one HSET can write all of a step's changes.

-- live reports whether a lease, its token and expiry as read, is held and
-- has not expired.
local function live(token, exp, now)
  return token and token ~= '' and (tonumber(exp) or 0) > now
end

-- has_lane reports whether lane (a number or a digit) is in lanes.
local function has_lane(lanes, lane)
  return string.find(lanes, lane, 1, true) ~= nil
end

-- without_lane takes lane (a digit) out of lanes. Most often it is the
-- only one.
local function without_lane(lanes, lane)
  if lanes == lane then
    return ''
  end
  return (string.gsub(lanes, lane, ''))
end

-- index_new puts a conversation that has just got work into the ready
-- index: at its lease's expiry when held (found again if the holder dies),
-- else ready from now. A conversation stays indexed until its last entry
-- is gone, so only its first needs this.
local function index_new(ready, tag, token, exp, now)
  if live(token, exp, now) then
    redis.call('ZADD', ready, exp, tag)
  else
    redis.call('ZADD', ready, 'NX', now, tag)
  end
end

-- lane_of reads the lane from an entry id "<seq>-<lane>", or nil: as a
-- number, then as its digit, which names the lane's count and goes into
-- lanes without a number formatted.
local function lane_of(id)
  local digit = string.match(id, '^%d+%-(%d)$')
  if digit then
    return SMALL[digit], digit
  end
  return nil
end

-- entry_fields finds the data and enqueue time among a stream entry's
-- fields {field, value, …}.
local function entry_fields(f)
  local data, at = '', '0'
  for i = 1, #f, 2 do
    if f[i] == 'd' then
      data = f[i + 1]
    elseif f[i] == 'at' then
      at = f[i + 1]
    end
  end
  return data, at
end

-- SLIM_OVER is the size of an entry's data past which running tells it
-- slimmed (see slim) rather than whole.
local SLIM_OVER = 4096

-- slim is an entry's data cut to what the running-turn mark reads of it
-- (sessions.TurnMark): the start of its text, a kilobyte, which holds
-- more than the mark's excerpt in any script, and the control key of its
-- meta when it has one. Data that does not decode is told whole.
local function slim(data)
  local ok, e = pcall(cjson.decode, data)
  if not ok or type(e) ~= 'table' then
    return data
  end
  local out = {text = type(e.text) == 'string' and string.sub(e.text, 1, 1024) or ''}
  local m = e.meta
  if type(m) == 'table' and m['herald.control'] ~= nil then
    out.meta = {['herald.control'] = m['herald.control']}
  end
  return cjson.encode(out)
end

-- running finds the entry a live lease holds the conversation with (its
-- state hash state) at now: its id, data (slimmed past SLIM_OVER: an
-- append to a busy conversation and every Meta read it, for the mark
-- alone), and the ms it was handed out at ('' when the state does not
-- say: a lease granted before pst was kept), or nil.
local function running(prefix, tag, state, now)
  local v = redis.call('HMGET', state, 'token', 'exp', 'pend', 'pd', 'pst')
  if not live(v[1], v[2], now) or not v[3] or v[3] == '' then
    return nil
  end
  local data = v[4]
  if not data or data == '' then
    local got = redis.call('XRANGE', lane_key(prefix, tag, lane_of(v[3]) or 0), v[3], v[3])
    if not got[1] then
      return nil
    end
    data = entry_fields(got[1][2])
  end
  if #data > SLIM_OVER then
    data = slim(data)
  end
  return v[3], data, v[5] or ''
end

-- next_entry finds the holder's next entry: pend, the one delivered
-- before and never acked, first, delivered once more (dlv is how often it
-- was, as read), else the oldest entry of the lowest of lanes. It returns
-- the entry's id, data, enqueue time and deliveries (nil when the queue is
-- empty); the caller records the id as pend and the deliveries as dlv with
-- its other state writes.
--
-- A lane's stream holds only entries not yet delivered and pend (unless
-- pend is kept in the state hash, pd and pat, as q_append keeps an entry it
-- delivered at once): a finish
-- deletes the entry it acks and those it absorbed, and the lease makes
-- one holder per conversation, so one delivered entry at most. With pend
-- settled first, the lane's first entry is therefore the next one, and a
-- plain XRANGE finds it: no read cursor (consumer group) to create with
-- each stream, nor to move, and so write to the AOF, with each read.
local function next_entry(prefix, tag, state, pend, dlv, lanes)
  if pend and pend ~= '' then
    -- An entry delivered as it was appended is kept in the state hash
    -- (see q_append), any other in its lane's stream.
    local kept = redis.call('HMGET', state, 'pd', 'pat')
    if kept[1] and kept[1] ~= '' then
      return pend, kept[1], kept[2] or '0', (tonumber(dlv) or 1) + 1
    end
    local got = redis.call('XRANGE', lane_key(prefix, tag, lane_of(pend) or 0), pend, pend)
    if got[1] then
      local data, at = entry_fields(got[1][2])
      return pend, data, at, (tonumber(dlv) or 1) + 1
    end
    redis.call('HSET', state, 'pend', '')
  end
  for lane = 0, LANES - 1 do
    if has_lane(lanes, lane) then
      local e = redis.call('XRANGE', lane_key(prefix, tag, lane), '-', '+', 'COUNT', 1)[1]
      if e then
        local data, at = entry_fields(e[2])
        return e[1], data, at, 1
      end
    end
  end
  return nil
end
