-- dlg_end records a running child's end under its claim: status, result
-- and end time, the child out of the running set and of its
-- conversation's active set, its delegation out of the live sets when no
-- child of it is left running or pending, and, when the child is the
-- last of its unit to end, the unit's completion (dlg_end_child), all in
-- one step. Reap ends a child with it too, and then only once the
-- child's claim ran out by the store's clock.
-- KEYS[1] the child's hash
-- ARGV[1] key prefix
-- ARGV[2] child id
-- ARGV[3] claim token
-- ARGV[4] terminal status
-- ARGV[5] encoded result
-- ARGV[6] now in ms, or '' for the server's time
-- ARGV[7] '1' to end the child only when its claim ran out (Reap), else ''
-- ARGV[8] the steers the result counts (delegation.Result.Steers)
-- ARGV[9], ARGV[10] the parent conversation's metadata field of prompt
--   tokens on the child's model and the result's prompt tokens; ARGV[11],
--   ARGV[12] the same of completion tokens (delegation.ParentUsage): added
--   to the parent's totals with the end ('' fields: none), unless the
--   child is an orchestrator's worker ('orc', dlg_start)
-- Returns {'LOST'}, {'STEERS'} when the child has more steers recorded
-- than the result counts (dlg_steer), having written nothing, or {'OK',
-- child id and CHILD_FIELDS as ended, then,
-- when it made one, the completion's id, unit, encoded results, total,
-- created ms and the delegation's body}.
local prefix, ckey, id = ARGV[1], KEYS[1], ARGV[2]
local v = redis.call('HMGET', ckey, 's', 'tok', 'exp', 'd', 'ct', 'sn', 'orc')
if v[1] ~= 'running' or v[2] ~= ARGV[3] then
  return {'LOST'}
end
local now = now_ms(ARGV[6])
if ARGV[7] == '1' and (tonumber(v[3]) or 0) > now then
  return {'LOST'}
end
if small(v[6]) > small(ARGV[8]) then
  return {'STEERS'}
end
redis.call('ZREM', dlg_key(prefix, 'running'), id)
if ARGV[9] ~= '' and v[7] ~= '1' then
  local meta = conv_key(prefix, v[5], 'meta')
  redis.call('HINCRBY', meta, ARGV[9], ARGV[10])
  redis.call('HINCRBY', meta, ARGV[11], ARGV[12])
end
return dlg_end_child(prefix, id, v[4], v[5], ARGV[4], ARGV[5], now)
