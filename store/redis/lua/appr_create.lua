-- appr_create stores a pending approval, unless its id exists, and
-- expires every other pending approval of its conversation under the
-- same key: their decision is the one given, at the new one's asking.
-- KEYS[1] the approval's hash (fields: approvals.go)
-- KEYS[2] the conversation's pending approvals, scored by sequence
-- KEYS[3] every pending approval, scored the same
-- KEYS[4] the conversation's decided approvals, scored by decision (ms)
-- KEYS[5] every decided approval, scored the same
-- KEYS[6] the sequence counter
-- ARGV[1] key prefix (an approval's hash is the prefix, 'appr:a:' and
--         its id)
-- ARGV[2] the id
-- ARGV[3] the conversation's tag
-- ARGV[4] the key
-- ARGV[5] the encoded approval
-- ARGV[6] the expired decision
-- ARGV[7] when it was asked, Unix ns (those it expires are decided then)
-- ARGV[8] the same in ms
-- Returns {'OK'} or {'CONFLICT'}.
if redis.call('EXISTS', KEYS[1]) == 1 then
  return {'CONFLICT'}
end
for _, id in ipairs(redis.call('ZRANGE', KEYS[2], '0', '-1')) do
  local h = ARGV[1] .. 'appr:a:' .. id
  if redis.call('HGET', h, 'k') == ARGV[4] then
    redis.call('HSET', h, 'd', ARGV[6], 'at', ARGV[7])
    redis.call('ZREM', KEYS[2], id)
    redis.call('ZREM', KEYS[3], id)
    redis.call('ZADD', KEYS[4], ARGV[8], id)
    redis.call('ZADD', KEYS[5], ARGV[8], id)
  end
end
local seq = int(redis.call('INCR', KEYS[6]))
redis.call('HSET', KEYS[1], 'b', ARGV[5], 'ct', ARGV[3], 'k', ARGV[4])
redis.call('ZADD', KEYS[2], seq, ARGV[2])
redis.call('ZADD', KEYS[3], seq, ARGV[2])
return {'OK'}
