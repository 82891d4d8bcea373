-- claim leases the conversation that has been ready longest and returns its
-- next entry. Expired leases are first moved back into the ready index (a
-- bounded number per call, so one call never runs long).
-- KEYS[1] ready sorted set (member: conversation tag, score: ready since)
-- KEYS[2] leases sorted set (member: conversation tag, score: expiry);
--   only leases over work are in it, so every expired one swept is a
--   conversation to hand over, however many idle leases expired with it
-- ARGV[1] key prefix
-- ARGV[2] worker name
-- ARGV[3] lease ttl in ms
-- ARGV[4] now in ms, or '' for the server's time
-- Returns {} when no conversation is ready, else
-- {tag, token, expires ms, entry id, entry data, enqueued ms, deliveries}.
local prefix = ARGV[1]
local now = now_ms(ARGV[4])
local SWEEP = 64
local TRIES = 16

local expired = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now, 'WITHSCORES', 'LIMIT', 0, SWEEP)
for i = 1, #expired, 2 do
  local tag = expired[i]
  redis.call('ZREM', KEYS[2], tag)
  -- The lease itself stays current until someone takes the conversation,
  -- so a slow holder that wakes up before then may still renew or commit.
  if load_state(conv_key(prefix, tag, 'state')).work > 0 then
    redis.call('ZADD', KEYS[1], 'NX', expired[i + 1], tag)
  end
end

for _ = 1, TRIES do
  -- Taken out of ready whatever follows: a live lease is in the leases set
  -- and comes back when it expires, and a conversation without work has
  -- nothing to be ready for.
  local first = redis.call('ZPOPMIN', KEYS[1])
  local tag = first[1]
  if not tag then
    return {}
  end
  local state = conv_key(prefix, tag, 'state')
  local st = load_state(state)
  local e, pend
  if st.work > 0 and not leased(st, now) then
    e, pend = next_entry(prefix, tag, state, st)
  end
  if e then
    -- The fence only ever increases, so every grant's token is new.
    local token = st.fence + 1
    local exp = now + tonumber(ARGV[3])
    if pend then
      redis.call('HSET', state, 'fence', token, 'worker', ARGV[2], 'token', token, 'exp', int(exp), 'pend', pend)
    else
      redis.call('HSET', state, 'fence', token, 'worker', ARGV[2], 'token', token, 'exp', int(exp))
    end
    redis.call('ZADD', KEYS[2], exp, tag)
    return {tag, token, exp, e[1], e[2], e[3], e[4]}
  end
end
return {}
