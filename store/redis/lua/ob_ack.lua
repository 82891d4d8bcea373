-- ob_ack removes a message the platform accepted.
-- KEYS: none; keys derive from the prefix (see doc.go).
-- ARGV[1] key prefix
-- ARGV[2] message id
-- ARGV[3] claim token
-- Returns {'OK'}, {'LOST'} or {'NOTFOUND'}.
local prefix, id = ARGV[1], ARGV[2]
local mkey = ob_key(prefix, 'm:' .. id)
local platform, err = ob_check(mkey, ARGV[3])
if err then
  return {err}
end
redis.call('ZREM', ob_key(prefix, 'due:' .. platform), id)
redis.call('ZREM', ob_key(prefix, 'claimed:' .. platform), id)
redis.call('ZREM', ob_key(prefix, 'all'), id)
redis.call('DEL', mkey)
return {'OK'}
