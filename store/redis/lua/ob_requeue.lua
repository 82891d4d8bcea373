-- ob_requeue makes a dead message pending again, due now, attempts reset.
-- KEYS: none; keys derive from the prefix (see doc.go).
-- ARGV[1] key prefix
-- ARGV[2] message id
-- ARGV[3] now in ms, or '' for the server's time
-- Returns {'OK'} or {'NOTFOUND'}.
local prefix, id = ARGV[1], ARGV[2]
local dead = ob_key(prefix, 'dead')
local mkey = ob_key(prefix, 'm:' .. id)
if not redis.call('ZSCORE', dead, id) then
  return {'NOTFOUND'}
end
redis.call('ZREM', dead, id)
local v = redis.call('HMGET', mkey, 'p', 't')
local platform = v[1]
if not platform then
  return {'NOTFOUND'}
end
if v[2] then
  -- Back in its place among its target's messages.
  redis.call('ZADD', ob_target_key(prefix, v[2]), ob_seq(id), id)
end
local now = now_ms(ARGV[3])
redis.call('HSET', mkey, 'n', 0, 'next', int(now))
redis.call('ZADD', ob_key(prefix, 'due:' .. platform), now, id)
redis.call('ZADD', ob_key(prefix, 'all'), ob_seq(id), id)
return {'OK'}
