-- dlg_cmp_retry gives a claimed completion back, only while the claim is
-- held: due after a delay, its attempts counted and the reason kept.
-- KEYS[1] the completion's hash
-- KEYS[2] the due set
-- ARGV[1] completion id
-- ARGV[2] claim token
-- ARGV[3] delay in ms
-- ARGV[4] reason (the last error)
-- ARGV[5] now in ms, or '' for the server's time
-- Returns {'OK'} or {'LOST'}.
local v = redis.call('HMGET', KEYS[1], 'st', 'tok', 'exp')
if v[1] ~= 'pending' or v[2] ~= ARGV[2] or not v[3] or v[3] == '' then
  return {'LOST'}
end
local next_at = int(now_ms(ARGV[5]) + tonumber(ARGV[3]))
redis.call('HINCRBY', KEYS[1], 'a', 1)
redis.call('HSET', KEYS[1], 'e', ARGV[4], 'next', next_at, 'w', '', 'exp', '')
redis.call('ZADD', KEYS[2], next_at, ARGV[1])
return {'OK'}
