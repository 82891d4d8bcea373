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
local v = redis.call('HGET', KEYS[1], 'v')
if ARGV[2] == '0' then
  if v then
    return {'CONFLICT', v}
  end
elseif v ~= ARGV[2] then
  return {'CONFLICT', v or ''}
end
local now = int(now_ms(ARGV[8]))
redis.call('HSET', KEYS[1], 'c', ARGV[3], 'k', ARGV[4], 'i', ARGV[5], 'd', ARGV[6],
  't', ARGV[7], 'v', int(small(ARGV[2]) + 1), 'u', now)
redis.call('ZADD', KEYS[2], '0', ARGV[1])
if ARGV[7] == '' then
  redis.call('ZREM', KEYS[3], ARGV[1])
else
  redis.call('ZADD', KEYS[3], ARGV[7], ARGV[1])
end
return {'OK', now}
