-- ob_dead moves a claimed message to the dead letters with a reason.
-- KEYS: none; keys derive from the prefix (see doc.go).
-- ARGV[1] key prefix
-- ARGV[2] message id
-- ARGV[3] claim token
-- ARGV[4] reason
-- Returns {'OK'}, {'LOST'} or {'NOTFOUND'}.
local prefix, id = ARGV[1], ARGV[2]
local mkey = ob_key(prefix, 'm:' .. id)
local platform, err = ob_check(mkey, ARGV[3])
if err then
  return {err}
end
redis.call('HSET', mkey, 'e', ARGV[4])
redis.call('HDEL', mkey, 'tok', 'exp', 'w')
if string.sub(ARGV[3], 1, 1) == '-' then
  redis.call('ZREM', ob_key(prefix, 'handed'), id) -- a handed claim
end
-- A handed claim of an earlier version is in the claimed index too.
redis.call('ZREM', ob_key(prefix, 'claimed:' .. platform), id)
redis.call('ZREM', ob_key(prefix, 'due:' .. platform), id)
redis.call('ZREM', ob_key(prefix, 'all'), id)
-- Scored by the id's sequence number, so dead letters list in the order
-- the messages were enqueued.
redis.call('ZADD', ob_key(prefix, 'dead'), tonumber(id), id)
return {'OK'}
