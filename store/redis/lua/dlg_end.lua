-- dlg_end records a running child's end under its claim: status, result
-- and end time, the child out of the running set and of its
-- conversation's active set, its delegation out of the live sets when no
-- child of it is left running or pending, and, when the child is the
-- last of its unit to end, the unit's completion (dlg_complete), all in
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
-- Returns {'LOST'}, or {'OK', child id and CHILD_FIELDS as ended, then,
-- when it made one, the completion's id, unit, encoded results, total,
-- created ms and the delegation's body}.
local prefix, ckey, id = ARGV[1], KEYS[1], ARGV[2]
local v = redis.call('HMGET', ckey, 's', 'tok', 'exp', 'd', 'ct')
if v[1] ~= 'running' or v[2] ~= ARGV[3] then
  return {'LOST'}
end
local now = now_ms(ARGV[6])
if ARGV[7] == '1' and (tonumber(v[3]) or 0) > now then
  return {'LOST'}
end
local dlg, tag = v[4], v[5]
redis.call('HSET', ckey, 's', ARGV[4], 'r', ARGV[5], 'en', int(now), 'o', '', 'exp', '')
redis.call('ZREM', dlg_key(prefix, 'running'), id)
redis.call('SREM', conv_key(prefix, tag, 'dlgact'), id)
if redis.call('HINCRBY', dlg_key(prefix, 'd:' .. dlg), 'left', -1) <= 0 then
  redis.call('ZREM', dlg_key(prefix, 'live'), dlg)
  redis.call('ZREM', conv_key(prefix, tag, 'dlglive'), dlg)
end
local out = {'OK'}
dlg_child_reply(out, prefix, id)
local cmp = dlg_complete(prefix, dlg, id, now)
if cmp then
  append_all(out, cmp)
end
return out
