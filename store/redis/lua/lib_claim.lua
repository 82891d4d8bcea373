-- Claiming a conversation, for claim and for finish, which may claim the
-- holder's next turn in the same call.

-- CLAIM_TRIES bounds how many stale members of the ready index one call
-- drops before it answers that nothing is ready.
local CLAIM_TRIES = 16

-- claim_next leases, to worker for ttl ms, the conversation first in the
-- ready index: the one ready longest, a lease that expired counting as
-- ready since its expiry. It returns the conversation's tag, the lease
-- token and expiry (ms), then the entry's id, data, enqueue time (ms) and
-- deliveries, then the conversation's history (a list of encoded
-- messages, oldest first), then 1 when the conversation has a session
-- controller's state, else 0; nil when nothing is ready. The history
-- and the controllers' presence come with the claim because the turn
-- reads them first thing: in the same call they cost a command each
-- here rather than a round trip each of their own.
local function claim_next(prefix, ready, worker, ttl, now)
  for _ = 1, CLAIM_TRIES do
    local head = redis.call('ZRANGE', ready, '0', '0', 'WITHSCORES')
    local tag = head[1]
    if not tag then
      return nil
    end
    if tonumber(head[2]) > now then
      -- The score is when a Claim may take the member; the first one not
      -- due yet means none is (it is the one held whose lease runs out
      -- first), told without reading its state.
      return nil
    end
    local state = conv_key(prefix, tag, 'state')
    local v = redis.call('HMGET', state, 'token', 'exp', 'pend', 'dlv', 'fence', 'lanes')
    if live(v[1], v[2], now) then
      -- A held conversation is indexed at its lease's expiry, and every
      -- other member of the index is ready since a time before now or
      -- held until a time after this one: none is ready.
      return nil
    end
    local lanes = v[6] or ''
    if lanes ~= '' then
      local id, data, at, deliveries = next_entry(prefix, tag, state, v[3], v[4], lanes)
      if id then
        -- The fence only ever increases, so every grant's token is new.
        -- The old lease stays current until this grant, so a slow holder
        -- that woke up before it could still commit.
        local token = int((tonumber(v[5]) or 0) + 1)
        local exp = int(now + ttl)
        redis.call('HSET', state, 'fence', token, 'worker', worker, 'token', token, 'exp', exp,
          'pend', id, 'dlv', deliveries, 'pst', int(now))
        -- Held, the conversation is indexed at its lease's expiry: found
        -- again if the holder dies, passed over while it lives.
        redis.call('ZADD', ready, exp, tag)
        local hist = redis.call('LRANGE', conv_key(prefix, tag, 'hist'), '0', '-1')
        local ctl = redis.call('EXISTS', conv_key(prefix, tag, 'ctl'))
        return tag, token, exp, id, data, at, deliveries, hist, ctl
      end
    end
    -- No work, or lanes that promise work the streams do not have: only
    -- a state changed by hand gets here, as the scripts take a
    -- conversation out of the index when its last entry goes.
    redis.call('ZREM', ready, tag)
  end
  return nil
end
