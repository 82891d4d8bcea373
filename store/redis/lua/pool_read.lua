-- pool_read reads a credential pool's key states, the key a conversation
-- last used and the store's clock at one instant.
-- KEYS[1] the pool's hash
-- KEYS[2] the conversation's key of the pool ('id|ms' of its last use);
--         absent for a request of no conversation
-- ARGV[1] now, ms, by the injected clock; '' for the server's TIME
-- ARGV[2] how long a conversation keeps its key, ms
-- Returns now ms, the conversation's key id ('' when none or older than
-- ARGV[2]), then the hash's fields and values, flat.
local now = now_ms(ARGV[1])
local sticky = ''
if KEYS[2] then
  local v = redis.call('GET', KEYS[2])
  if v then
    local id, at = string.match(v, '^(.*)|(%d+)$')
    if id and now - tonumber(at) < tonumber(ARGV[2]) then
      sticky = id
    end
  end
end
local out = {int(now), sticky}
local kv = redis.call('HGETALL', KEYS[1])
for i = 1, #kv do
  out[#out + 1] = kv[i]
end
return out
