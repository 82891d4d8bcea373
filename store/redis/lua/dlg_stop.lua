-- dlg_stop ends a child that is still pending, no instance having
-- claimed it (delegation Store.StopPending): the child out of the pending
-- list, so that no claim hands it out, then the end dlg_end records
-- (dlg_end_child), completion and all, in one step. A child that runs or
-- has ended is left as it is.
-- KEYS[1] the child's hash
-- ARGV[1] key prefix
-- ARGV[2] child id
-- ARGV[3] terminal status
-- ARGV[4] encoded result
-- ARGV[5] now in ms, or '' for the server's time
-- Returns {'NOTPENDING'}, or dlg_end's {'OK', …} reply.
local prefix, id = ARGV[1], ARGV[2]
local v = redis.call('HMGET', KEYS[1], 's', 'd', 'ct')
if v[1] ~= 'pending' then
  return {'NOTPENDING'}
end
-- The child is in the list once, where its dispatch pushed it. dlg_claim
-- drops what is not pending only within a bound, so a stopped child is
-- not left there for it.
redis.call('LREM', dlg_key(prefix, 'pending'), 1, id)
return dlg_end_child(prefix, id, v[2], v[3], ARGV[3], ARGV[4], now_ms(ARGV[5]))
