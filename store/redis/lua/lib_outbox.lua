-- Helpers of the scripts that write the outbox.

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
