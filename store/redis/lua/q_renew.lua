-- q_renew extends a lease to ttl from now.
-- KEYS[1] conversation state hash
-- KEYS[2] ready sorted set
-- ARGV[1] conversation tag
-- ARGV[2] lease token
-- ARGV[3] ttl in ms
-- ARGV[4] now in ms, or '' for the server's time
-- Returns {'LOST'} or {'OK', worker, expires ms}.
-- An expired lease nobody has taken over is still current: the token, not
-- the clock, is what keeps a stale holder from writing.
local v = redis.call('HMGET', KEYS[1], 'token', 'worker', 'lanes')
if v[1] ~= ARGV[2] then
  return {'LOST'}
end
local exp = int(now_ms(ARGV[4]) + tonumber(ARGV[3]))
redis.call('HSET', KEYS[1], 'exp', exp)
-- A held conversation with work is indexed at its lease's expiry, which
-- moves with the lease; one without work is not indexed.
if v[3] and v[3] ~= '' then
  redis.call('ZADD', KEYS[2], exp, ARGV[1])
end
return {'OK', v[2], exp}
