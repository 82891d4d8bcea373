-- kb_lane_read reads every kanban lane's state, by name.
-- KEYS[1] the index of every lane
-- ARGV[1] key prefix
-- Returns, per lane: its version and its encoding.
local out = {}
for _, lane in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  local v = redis.call('HMGET', kb_key(ARGV[1], 'lane:' .. lane), 'v', 'j')
  if v[1] then
    out[#out + 1] = v[1]
    out[#out + 1] = v[2]
  end
end
return out
