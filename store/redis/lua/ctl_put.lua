-- ctl_put writes a controller's state whole, over the version its writer
-- read ('0': none is stored), and files it in its conversation's index
-- and, when it fires on time, in the due index (else takes it out).
-- KEYS[1] the state's hash (fields c conv, k kind, i id, d data, t due
--         ms or '', v version, u updated ms)
-- KEYS[2] the conversation's index of states (all scored 0, so by kind,
--         then id)
-- KEYS[3] the due index, scored by due time (ms)
-- ARGV[1] the state's member in both indexes (KEYS[1] without the prefix)
-- ARGV[2] the version read, '0' for none
-- ARGV[3] the conversation
-- ARGV[4] the kind
-- ARGV[5] the id
-- ARGV[6] the data
-- ARGV[7] the due time in ms, or '' when it does not fire on time
-- ARGV[8] now in ms, or '' for the server's clock
-- Returns {'OK', now ms} or {'CONFLICT', the stored version or ''}.
local now = int(now_ms(ARGV[8]))
local v = ctl_write(KEYS[1], KEYS[2], KEYS[3], ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7], now)
if v then
  return {'CONFLICT', v}
end
return {'OK', now}
