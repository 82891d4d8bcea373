-- pool_use counts one use of a key of a credential pool and gives it the
-- pool's next use number; with a conversation, the key becomes its key,
-- which the key's TTL forgets once the conversation is silent.
-- KEYS[1] the pool's hash
-- KEYS[2] the conversation's key of the pool; absent for none
-- ARGV[1] the key's id
-- ARGV[2] now, ms, by the injected clock; '' for the server's TIME
-- ARGV[3] how long a conversation keeps its key, ms
local n = redis.call('HINCRBY', KEYS[1], 'seq', 1)
redis.call('HINCRBY', KEYS[1], ARGV[1] .. ':u', 1)
redis.call('HSET', KEYS[1], ARGV[1] .. ':l', int(n))
if KEYS[2] then
  redis.call('SET', KEYS[2], ARGV[1] .. '|' .. int(now_ms(ARGV[2])), 'PX', ARGV[3])
end
return {'OK'}
