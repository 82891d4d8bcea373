-- Helpers of the once-only claim scripts (once_*.lua) and of the cron
-- fire scripts that claim and finish a fire in the same call; once.go
-- names the keys.

-- once_claim_fire claims fire id for owner for ttl ms at now when nobody
-- holds it: it is new, its claim ran out and it is not done, or it was
-- done longer ago than the dedupe window. Its token comes from one
-- counter, so it is above every earlier claim's, of this fire or any.
-- fire is the fire's hash (fields o owner, tok claim token, exp claim
-- expiry ms, and once done du: until when that counts, ms), live the
-- index of the fires not done, counter the token counter. It returns
-- 'CLAIMED', owner, token, expiry ms; 'HELD', the holder, its token,
-- its expiry ms; or 'DONE'.
local function once_claim_fire(fire, live, counter, id, owner, ttl, now)
  local v = redis.call('HMGET', fire, 'o', 'tok', 'exp', 'du')
  if v[4] then
    if tonumber(v[4]) > now then
      return 'DONE'
    end
  elseif v[2] and tonumber(v[3]) > now then
    return 'HELD', v[1], v[2], v[3]
  end
  local tok = int(redis.call('INCR', counter))
  local exp = int(now + ttl)
  redis.call('HSET', fire, 'o', owner, 'tok', tok, 'exp', exp)
  if v[4] then
    -- Forgotten, the fire is new again: it is not done, and its key has
    -- no TTL while it is claimed.
    redis.call('HDEL', fire, 'du')
    redis.call('PERSIST', fire)
  end
  redis.call('ZADD', live, exp, id)
  return 'CLAIMED', owner, tok, exp
end

-- once_check_done tells whether the claim token may mark fire done:
-- 'OK', 'AGAIN' (done under this very claim already: a retried call),
-- 'LOST' (another claim is the fire's now) or 'NOTFOUND'.
local function once_check_done(fire, token)
  local v = redis.call('HMGET', fire, 'tok', 'du')
  if not v[1] then
    return 'NOTFOUND'
  end
  if v[1] ~= token then
    return 'LOST'
  end
  if v[2] then
    return 'AGAIN'
  end
  return 'OK'
end

-- once_mark_done marks fire id done at now: it leaves live, the index of
-- the fires not done, counts as done for window ms by the store's clock,
-- and its key expires after that window by the server's (the key's own
-- TTL only collects garbage).
local function once_mark_done(fire, live, id, window, now)
  redis.call('HSET', fire, 'du', int(now + tonumber(window)))
  redis.call('ZREM', live, id)
  redis.call('PEXPIRE', fire, window)
end
