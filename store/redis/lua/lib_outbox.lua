-- Helpers of the scripts that write the outbox.

local function ob_key(prefix, suffix)
  return prefix .. 'ob:' .. suffix
end

-- ob_enqueue adds one outbox message and returns its id and 1 when its
-- idempotency key was seen within the window (nothing added), else 0.
-- Ids are zero-padded so that messages due in the same millisecond sort
-- in the order they were enqueued. Given a claim (hold: {worker, token,
-- expiry}), a message due now is enqueued claimed, as ob_claim would
-- have claimed it, and the third result is true; a hold without a token
-- yet takes the message's sequence number, negated.
local function ob_enqueue(prefix, data, platform, idem, next_at, now, window, hold)
  local seq = redis.call('INCR', ob_key(prefix, 'seq'))
  local id = string.format('%012d', seq)
  if idem ~= '' then
    local first = remember_once(ob_key(prefix, 'idem:' .. idem), id, now, window)
    if first then
      return first, 1, false
    end
  end
  local due = now
  if next_at ~= '' then
    due = tonumber(next_at)
  end
  local mkey = ob_key(prefix, 'm:' .. id)
  local claimed = hold and due <= now
  if claimed then
    hold[2] = hold[2] or int(-seq)
    redis.call('HSET', mkey, 'd', data, 'p', platform, 'n', '0', 'next', int(due), 'at', int(now), 'e', '',
      'tok', hold[2], 'exp', hold[3], 'w', hold[1])
    redis.call('ZADD', ob_key(prefix, 'claimed:' .. platform), hold[3], id)
  else
    redis.call('HSET', mkey, 'd', data, 'p', platform, 'n', '0', 'next', int(due), 'at', int(now), 'e', '')
    redis.call('ZADD', ob_key(prefix, 'due:' .. platform), due, id)
  end
  -- The id is the sequence zero-padded, which ZADD reads as the score.
  redis.call('ZADD', ob_key(prefix, 'all'), id, id)
  return id, 0, claimed
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
