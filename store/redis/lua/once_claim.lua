-- once_claim claims a fire for an owner when nobody holds it: it is new,
-- its claim ran out and it is not done, or it was done longer ago than
-- the dedupe window, by the store's clock. Its token comes from one
-- counter, so it is above every earlier claim's, of this fire or any.
-- KEYS[1] the fire's hash (fields o owner, tok claim token, exp claim
--         expiry ms, and once done du: until when that counts, ms)
-- KEYS[2] the index of the fires not done, scored by claim expiry (ms)
-- KEYS[3] the token counter
-- ARGV[1] the fire id
-- ARGV[2] the owner
-- ARGV[3] the claim ttl in ms
-- ARGV[4] now in ms, or '' for the server's time
-- Returns {'CLAIMED', token, expiry ms}, {'HELD', owner, token, expiry
-- ms} or {'DONE'}.
local now = now_ms(ARGV[4])
local v = redis.call('HMGET', KEYS[1], 'o', 'tok', 'exp', 'du')
if v[4] then
  if tonumber(v[4]) > now then
    return {'DONE'}
  end
elseif v[2] and tonumber(v[3]) > now then
  return {'HELD', v[1], v[2], v[3]}
end
local tok = int(redis.call('INCR', KEYS[3]))
local exp = int(now + tonumber(ARGV[3]))
redis.call('HSET', KEYS[1], 'o', ARGV[2], 'tok', tok, 'exp', exp)
if v[4] then
  -- Forgotten, the fire is new again: it is not done, and its key has
  -- no TTL while it is claimed.
  redis.call('HDEL', KEYS[1], 'du')
  redis.call('PERSIST', KEYS[1])
end
redis.call('ZADD', KEYS[2], exp, ARGV[1])
return {'CLAIMED', tok, exp}
