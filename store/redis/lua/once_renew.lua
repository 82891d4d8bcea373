-- once_renew extends the claims that are still current (the fire is not
-- done and its token is the claim's) to ttl from now, and moves them in
-- the index of the fires not done.
-- KEYS[1] the index of the fires not done
-- KEYS[2 ..] the fires' hashes
-- ARGV[1] the claim ttl in ms
-- ARGV[2] now in ms, or '' for the server's time
-- ARGV[3 ..] pairs, one per KEYS[2 ..]: the fire id, the claim token
-- Returns {expiry ms, then per claim 1 when renewed, else 0}.
local now = now_ms(ARGV[2])
local exp = int(now + tonumber(ARGV[1]))
local out = {exp}
for i = 2, #KEYS do
  local a = 2 * i - 1
  local v = redis.call('HMGET', KEYS[i], 'tok', 'du')
  if v[1] == ARGV[a + 1] and not v[2] then
    redis.call('HSET', KEYS[i], 'exp', exp)
    redis.call('ZADD', KEYS[1], exp, ARGV[a])
    out[#out + 1] = 1
  else
    out[#out + 1] = 0
  end
end
return out
