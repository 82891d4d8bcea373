-- appr_decide answers a pending approval: its decision, by whom, when,
-- and the question's message id when one is given; it moves from the
-- pending indexes to the decided ones. An approval decided already is
-- left as it is.
-- KEYS[1] the approval's hash (fields: approvals.go)
-- KEYS[2] every pending approval
-- KEYS[3] every decided approval, scored by decision (ms)
-- ARGV[1] key prefix (the conversation's indexes are built from it and
--         the hash's ct)
-- ARGV[2] the id
-- ARGV[3] the decision
-- ARGV[4] who decided
-- ARGV[5] when, Unix ns
-- ARGV[6] the same in ms
-- ARGV[7] the message id, or '' to leave it
-- Returns {'NOTFOUND'}, or {'OK' or 'CONFLICT', the encoded approval,
-- decision, by, at ns, message id} as it stands after the call.
local f = redis.call('HMGET', KEYS[1], 'b', 'ct', 'd', 'by', 'at', 'm')
if not f[1] then
  return {'NOTFOUND'}
end
if f[3] and f[3] ~= '' then
  return {'CONFLICT', f[1], f[3], f[4] or '', f[5] or '', f[6] or ''}
end
local m = f[6] or ''
if ARGV[7] ~= '' then
  m = ARGV[7]
end
redis.call('HSET', KEYS[1], 'd', ARGV[3], 'by', ARGV[4], 'at', ARGV[5], 'm', m)
redis.call('ZREM', conv_key(ARGV[1], f[2], 'apprp'), ARGV[2])
redis.call('ZREM', KEYS[2], ARGV[2])
redis.call('ZADD', conv_key(ARGV[1], f[2], 'apprd'), ARGV[6], ARGV[2])
redis.call('ZADD', KEYS[3], ARGV[6], ARGV[2])
return {'OK', f[1], ARGV[3], ARGV[4], ARGV[5], m}
