-- dlg_cmp_ack marks a claimed completion delivered, only while the claim
-- is held (its token, and a claim not given back), and takes it out of
-- the due set for good.
-- KEYS[1] the completion's hash
-- KEYS[2] the due set
-- ARGV[1] completion id
-- ARGV[2] claim token
-- ARGV[3] now in ms, or '' for the server's time
-- Returns {'OK'} or {'LOST'}.
local v = redis.call('HMGET', KEYS[1], 'st', 'tok', 'exp')
if v[1] ~= 'pending' or v[2] ~= ARGV[2] or not v[3] or v[3] == '' then
  return {'LOST'}
end
redis.call('HSET', KEYS[1], 'st', 'delivered', 'dat', int(now_ms(ARGV[3])), 'w', '', 'exp', '')
redis.call('ZREM', KEYS[2], ARGV[1])
return {'OK'}
