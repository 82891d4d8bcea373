-- ob_release gives a claimed message back, due at a later time; with
-- ARGV[5] = '1' the attempt counts and its reason is kept (Release), else
-- nothing is counted (Postpone: the route went away).
-- KEYS: none; keys derive from the prefix (see doc.go).
-- ARGV[1] key prefix
-- ARGV[2] message id
-- ARGV[3] claim token
-- ARGV[4] next attempt in ms
-- ARGV[5] '1' to count the attempt
-- ARGV[6] reason of the failure
-- Returns {'OK'}, {'LOST'} or {'NOTFOUND'}.
local prefix, id = ARGV[1], ARGV[2]
local mkey = ob_key(prefix, 'm:' .. id)
local platform, err, target = ob_check(mkey, ARGV[3])
if err then
  return {err}
end
if ARGV[5] == '1' then
  redis.call('HINCRBY', mkey, 'n', 1)
  redis.call('HSET', mkey, 'e', ARGV[6])
end
redis.call('HSET', mkey, 'next', ARGV[4])
redis.call('HDEL', mkey, 'tok', 'exp', 'w')
if ob_unclaim(prefix, platform, id, ARGV[3]) then
  -- A handed message was in ob:handed alone, unless its claim had run
  -- out and ob_undue made it due already; pending, it is in ob:all.
  redis.call('ZADD', ob_key(prefix, 'all'), ob_seq(id), id)
end
ob_unwait(prefix, id)
redis.call('ZADD', ob_key(prefix, 'due:' .. platform), tonumber(ARGV[4]), id)
-- The message after it to its target, should it wait for this one's
-- worker, is due again: it waits behind this one's next attempt instead.
ob_let_go(prefix, {id}, {target})
return {'OK'}
