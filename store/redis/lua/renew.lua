-- renew extends a lease to ttl from now.
-- KEYS[1] conversation state hash
-- KEYS[2] ready sorted set
-- KEYS[3] leases sorted set
-- ARGV[1] conversation tag
-- ARGV[2] lease token
-- ARGV[3] ttl in ms
-- ARGV[4] now in ms, or '' for the server's time
-- Returns {'LOST'} or {'OK', worker, expires ms}.
-- An expired lease nobody has taken over is still current: the token, not
-- the clock, is what keeps a stale holder from writing.
local st = load_state(KEYS[1])
if st.token ~= ARGV[2] then
  return {'LOST'}
end
local exp = now_ms(ARGV[4]) + tonumber(ARGV[3])
redis.call('HSET', KEYS[1], 'exp', int(exp))
-- Only a lease over work is watched for expiry; an append to an idle held
-- conversation adds it.
if st.work > 0 then
  redis.call('ZADD', KEYS[3], exp, ARGV[1])
else
  redis.call('ZREM', KEYS[3], ARGV[1])
end
-- An expired lease may already have been swept into the ready index;
-- renewed, it is held again.
redis.call('ZREM', KEYS[2], ARGV[1])
return {'OK', st.worker, exp}
