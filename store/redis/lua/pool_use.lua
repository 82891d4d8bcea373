-- pool_use counts one use of a key of a credential pool and gives it the
-- pool's next use number.
-- KEYS[1] the pool's hash
-- ARGV[1] the key's id
local n = redis.call('HINCRBY', KEYS[1], 'seq', 1)
redis.call('HINCRBY', KEYS[1], ARGV[1] .. ':u', 1)
redis.call('HSET', KEYS[1], ARGV[1] .. ':l', int(n))
return {'OK'}
