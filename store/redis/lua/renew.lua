-- renew extends a lease to ttl from now.
-- KEYS[1] conversation state hash
-- KEYS[2] ready sorted set
-- KEYS[3] leases sorted set
-- ARGV[1] conversation tag
-- ARGV[2] lease token
-- ARGV[3] ttl in ms
-- ARGV[4] now in ms, or '' for the server's time
-- Returns {'LOST'} or {'OK', worker, expires ms}.
if not lease_ok(KEYS[1], ARGV[2]) then
  return {'LOST'}
end
local exp = now_ms(ARGV[4]) + tonumber(ARGV[3])
redis.call('HSET', KEYS[1], 'exp', int(exp))
redis.call('ZADD', KEYS[3], exp, ARGV[1])
-- An expired lease may already have been swept into the ready index;
-- renewed, it is held again.
redis.call('ZREM', KEYS[2], ARGV[1])
return {'OK', redis.call('HGET', KEYS[1], 'worker'), exp}
