-- ob_dead moves a claimed message to the dead letters with a reason.
-- KEYS: none; keys derive from the prefix (see doc.go).
-- ARGV[1] key prefix
-- ARGV[2] message id
-- ARGV[3] claim token
-- ARGV[4] reason
-- Returns {'OK'}, {'LOST'} or {'NOTFOUND'}.
local prefix, id = ARGV[1], ARGV[2]
local mkey = ob_key(prefix, 'm:' .. id)
local platform, err, target = ob_check(mkey, ARGV[3])
if err then
  return {err}
end
-- A dead letter holds up none of the messages behind it.
ob_untarget(prefix, {id}, {target})
ob_unwait(prefix, id)
ob_let_go(prefix, {id}, {target})
redis.call('HSET', mkey, 'e', ARGV[4])
redis.call('HDEL', mkey, 'tok', 'exp', 'w')
ob_unclaim(prefix, platform, id, ARGV[3])
redis.call('ZREM', ob_key(prefix, 'due:' .. platform), id)
redis.call('ZREM', ob_key(prefix, 'all'), id)
-- Scored by the id's sequence number, so dead letters list in the order
-- the messages were enqueued.
redis.call('ZADD', ob_key(prefix, 'dead'), ob_seq(id), id)
return {'OK'}
