-- Helpers of the scripts that write the outbox.

local function ob_key(prefix, suffix)
  return prefix .. 'ob:' .. suffix
end

-- ob_target_key is the index of one target's undelivered messages (not
-- dead), scored by their sequence numbers: the order they leave in.
local function ob_target_key(prefix, target)
  return ob_key(prefix, 't:' .. target)
end

-- ob_seq is the sequence number of message id: the digits it ends in,
-- after its shard's label in a sharded layout (shard_id), or nil for an
-- id no enqueue made. The indexes in enqueue order are scored by it.
local function ob_seq(id)
  return tonumber(string.match(id, '(%d+)$'))
end

-- ob_unwait ends the wait of message id for another worker's message
-- (ob_claim): it leaves that worker's ob:waits set. It reports whether
-- the message waited.
local function ob_unwait(prefix, id)
  local mkey = ob_key(prefix, 'm:' .. id)
  local wf = redis.call('HGET', mkey, 'wf')
  if not wf then
    return false
  end
  redis.call('HDEL', mkey, 'wf')
  redis.call('ZREM', ob_key(prefix, 'waits:' .. wf), id)
  return true
end

-- ob_wait_for makes message id wait for worker: out of the due
-- messages every claim reads, in ob:waits:<worker>, which that worker's
-- claims read. It reports whether the message waited for nobody before
-- (so the caller takes it out of its due index).
local function ob_wait_for(prefix, id, worker)
  local was = ob_unwait(prefix, id)
  redis.call('HSET', ob_key(prefix, 'm:' .. id), 'wf', worker)
  redis.call('ZADD', ob_key(prefix, 'waits:' .. worker), ob_seq(id), id)
  return not was
end

-- ob_let_go makes the message after each of ids to its target (targets[i]
-- is the target of ids[i], '' for none) due for every claim again, should
-- it wait for a worker: the message before it was settled.
local function ob_let_go(prefix, ids, targets)
  for i, id in ipairs(ids) do
    if targets[i] ~= '' then
      local nxt = redis.call('ZRANGEBYSCORE', ob_target_key(prefix, targets[i]), '(' .. ob_seq(id), '+inf',
        'LIMIT', 0, 1)[1]
      if nxt and ob_unwait(prefix, nxt) then
        local v = redis.call('HMGET', ob_key(prefix, 'm:' .. nxt), 'p', 'next')
        redis.call('ZADD', ob_key(prefix, 'due:' .. v[1]), v[2], nxt)
      end
    end
  end
end

-- ob_held_by reports whether every message in ids is held by worker under
-- a claim that has not run out at now: a message behind them may go to
-- that worker, which sends them in order.
local function ob_held_by(prefix, ids, worker, now)
  for _, id in ipairs(ids) do
    local v = redis.call('HMGET', ob_key(prefix, 'm:' .. id), 'w', 'exp')
    if v[1] ~= worker or (tonumber(v[2]) or 0) <= now then
      return false
    end
  end
  return true
end

-- ob_renew renews worker's heartbeat (ob:workers) by the ttl of its
-- last beat (ob:beats), as a claim does: the claimer is alive, whatever
-- its heartbeat said. A worker that never beat is left alone. It returns
-- the two keys.
local function ob_renew(prefix, worker, now)
  local workers = ob_key(prefix, 'workers')
  local beats = ob_key(prefix, 'beats')
  local beat = tonumber(redis.call('HGET', beats, worker))
  if beat and beat > 0 then
    local until_at = tonumber(redis.call('ZSCORE', workers, worker))
    if until_at and until_at < now + beat then
      redis.call('ZADD', workers, now + beat, worker)
    end
  end
  return workers, beats
end

-- ob_enqueue adds one outbox message and returns its id and 1 when its
-- idempotency key was seen within the window (nothing added), else 0.
-- Ids are the shard's sequence zero-padded (after the shard's label in a
-- sharded layout, shard_id), so that messages due in the same
-- millisecond sort in the order they were enqueued. The target ("platform:chat[:thread]")
-- names the platform before its first colon. Given a claim (hold:
-- {worker, token, expiry}), a message due now is enqueued claimed, handed
-- to that worker, and the third result is true, unless an earlier message
-- to its target is not held by that worker (then it waits its turn, due);
-- a hold without a token yet takes the message's sequence number,
-- negated. A handed message is indexed in ob:handed, by its claim's
-- expiry: ob_claim makes it due (due:<platform> and all) once that has
-- passed, and the ack that most handed messages get removes it from that
-- index and its target's.
local function ob_enqueue(prefix, data, target, idem, next_at, now, window, hold)
  local seq = redis.call('INCR', ob_key(prefix, 'seq'))
  local id = shard_id(prefix, string.format('%012d', seq))
  if idem ~= '' then
    local first = remember_once(ob_key(prefix, 'idem:' .. idem), id, now, window)
    if first then
      return first, 1, false
    end
  end
  local platform = string.match(target, '^[^:]*')
  -- The times as numbers to compare and as strings to store, made once.
  local at = int(now)
  local due, due_at = now, at
  if next_at ~= '' then
    due = tonumber(next_at)
    due_at = int(due)
  end
  local mkey = ob_key(prefix, 'm:' .. id)
  local tkey = ob_target_key(prefix, target)
  local claimed = hold and due <= now
  if claimed then
    -- Usually no earlier message waits: the index is empty.
    local earlier = redis.call('ZRANGE', tkey, 0, 15)
    if #earlier > 0 then
      claimed = #earlier < 16 and ob_held_by(prefix, earlier, hold[1], now)
    end
  end
  redis.call('ZADD', tkey, seq, id)
  if claimed then
    hold[2] = hold[2] or int(-seq)
    redis.call('HSET', mkey, 'd', data, 'p', platform, 't', target, 'n', '0', 'next', due_at, 'at', at, 'e', '',
      'tok', hold[2], 'exp', hold[3], 'w', hold[1])
    redis.call('ZADD', ob_key(prefix, 'handed'), hold[3], id)
    return id, 0, true
  end
  redis.call('HSET', mkey, 'd', data, 'p', platform, 't', target, 'n', '0', 'next', due_at, 'at', at, 'e', '')
  redis.call('ZADD', ob_key(prefix, 'due:' .. platform), due_at, id)
  redis.call('ZADD', ob_key(prefix, 'all'), seq, id)
  return id, 0, false
end

-- group_add appends the values after name to groups[name], a list made
-- on first use, whose name order then lists in the order first seen.
local function group_add(groups, order, name, ...)
  local l = groups[name]
  if not l then
    l = {}
    groups[name] = l
    order[#order + 1] = name
  end
  for i = 1, select('#', ...) do
    l[#l + 1] = select(i, ...)
  end
end

-- ob_undue makes handed messages ({id, …}) whose claims ran out, now
-- gone from ob:handed, due at their next attempt like any other message
-- (due:<platform> and all). They keep their claim tokens until someone
-- claims them again, so a slow sender that got through can still ack.
local function ob_undue(prefix, ids)
  local byplat, plats, all = {}, {}, {}
  for _, id in ipairs(ids) do
    local v = redis.call('HMGET', ob_key(prefix, 'm:' .. id), 'p', 'next')
    if v[1] then
      group_add(byplat, plats, v[1], v[2], id)
      all[#all + 1] = ob_seq(id)
      all[#all + 1] = id
    end
  end
  for _, platform in ipairs(plats) do
    local l = byplat[platform]
    call_all('ZADD', ob_key(prefix, 'due:' .. platform), l, 1, #l)
  end
  if #all > 0 then
    call_all('ZADD', ob_key(prefix, 'all'), all, 1, #all)
  end
end

-- is_handed tells a handed claim's token (negative, see ob_enqueue) from
-- an ob_claim's.
local function is_handed(token)
  return string.sub(token, 1, 1) == '-'
end

-- ob_unclaim takes a message out of the index of its claim, token: the
-- platform's claimed index, or ob:handed for a handed claim, and reports
-- whether it was a handed one. A handed claim leaves the claimed index
-- too, where an earlier version indexed handed messages.
local function ob_unclaim(prefix, platform, id, token)
  redis.call('ZREM', ob_key(prefix, 'claimed:' .. platform), id)
  if not is_handed(token) then
    return false
  end
  redis.call('ZREM', ob_key(prefix, 'handed'), id)
  return true
end

-- ob_check is the guard of every write under an outbox claim. It returns
-- the message's platform, or an error, and its target ('' for a message
-- an earlier version enqueued, which no target index holds).
local function ob_check(mkey, token)
  local v = redis.call('HMGET', mkey, 'p', 'tok', 't')
  if not v[1] then
    return nil, 'NOTFOUND'
  end
  if v[2] ~= token then
    return nil, 'LOST'
  end
  return v[1], nil, v[3] or ''
end

-- ob_untarget takes delivered or dead messages out of their targets'
-- indexes: targets[i] is the target of ids[i] ('' for none).
local function ob_untarget(prefix, ids, targets)
  local bytarget, order = {}, {}
  for i, id in ipairs(ids) do
    if targets[i] ~= '' then
      group_add(bytarget, order, targets[i], id)
    end
  end
  for _, target in ipairs(order) do
    local l = bytarget[target]
    call_all('ZREM', ob_target_key(prefix, target), l, 1, #l)
  end
end

-- ob_fields are the hash fields a message is read back from, in the
-- order the scripts return them after its id.
local OB_FIELDS = {'d', 'n', 'next', 'at', 'e', 'pg'}
