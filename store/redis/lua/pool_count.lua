-- pool_count counts uses of keys of a credential pool, in order: each
-- moves the pool's use number on by its count and takes the number it
-- reaches as its last use.
-- KEYS[1] the pool's hash
-- ARGV    pairs of a key's id and its count of uses (1 or more)
for i = 1, #ARGV, 2 do
  local n = redis.call('HINCRBY', KEYS[1], 'seq', ARGV[i + 1])
  redis.call('HINCRBY', KEYS[1], ARGV[i] .. ':u', ARGV[i + 1])
  redis.call('HSET', KEYS[1], ARGV[i] .. ':l', int(n))
end
return {'OK'}
