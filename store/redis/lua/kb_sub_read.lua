-- kb_sub_read reads every subscription, by id, or one board's.
-- KEYS[1] the index of every subscription
-- ARGV[1] key prefix
-- ARGV[2] the board, or '' for all
-- Returns, per subscription: its version and its encoding.
local out = {}
for _, id in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  local v = redis.call('HMGET', kb_key(ARGV[1], 'sub:' .. id), 'v', 'j', 'b')
  if v[1] and (ARGV[2] == '' or v[3] == ARGV[2]) then
    out[#out + 1] = v[1]
    out[#out + 1] = v[2]
  end
end
return out
