-- once_done marks a fire done under its current claim: it leaves the
-- index of the fires not done, counts as done for the dedupe window by
-- the store's clock, and its key expires after that window by the
-- server's (the key's own TTL only collects garbage).
-- KEYS[1] the fire's hash
-- KEYS[2] the index of the fires not done
-- ARGV[1] the fire id
-- ARGV[2] the claim token
-- ARGV[3] the dedupe window in ms
-- ARGV[4] now in ms, or '' for the server's time
-- Returns {'OK'}, {'LOST'} or {'NOTFOUND'}.
local v = redis.call('HMGET', KEYS[1], 'tok', 'du')
if not v[1] then
  return {'NOTFOUND'}
end
if v[1] ~= ARGV[2] then
  return {'LOST'}
end
if v[2] then
  -- Done under this very claim already: a retried call.
  return {'OK'}
end
redis.call('HSET', KEYS[1], 'du', int(now_ms(ARGV[4]) + tonumber(ARGV[3])))
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return {'OK'}
