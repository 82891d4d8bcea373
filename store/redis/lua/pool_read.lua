-- pool_read reads a credential pool's key states and the store's clock
-- at one instant.
-- KEYS[1] the pool's hash
-- ARGV[1] now, ms, by the injected clock; '' for the server's TIME
-- Returns now ms, then the hash's fields and values, flat.
local out = {int(now_ms(ARGV[1]))}
local kv = redis.call('HGETALL', KEYS[1])
for i = 1, #kv do
  out[#out + 1] = kv[i]
end
return out
