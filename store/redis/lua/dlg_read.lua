-- dlg_read reads delegations with their children, in one step so that
-- each reads as it stood at one instant: either those a sorted set holds,
-- newest first, or the ones named.
-- KEYS[1] a sorted set of delegation ids scored by creation, or, when
--   ARGV[2] is 0, none but a key of the shard (its prefix) to route by
-- ARGV[1] key prefix
-- ARGV[2] how many to read from KEYS[1], newest first; 0 to read the
--   delegations named
-- ARGV[3 ..] the delegation ids to read, when ARGV[2] is 0
-- Returns, per delegation found: id, body, created ms, the number of
-- children c, then c groups of child id and CHILD_FIELDS, by dispatch.
local prefix = ARGV[1]
local ids = {}
if tonumber(ARGV[2]) > 0 then
  ids = redis.call('ZREVRANGE', KEYS[1], 0, tonumber(ARGV[2]) - 1)
else
  for i = 3, #ARGV do
    ids[#ids + 1] = ARGV[i]
  end
end
local out = {}
for _, id in ipairs(ids) do
  local v = redis.call('HMGET', dlg_key(prefix, 'd:' .. id), 'b', 'at')
  if v[1] then
    local kids = redis.call('LRANGE', dlg_key(prefix, 'kids:' .. id), 0, -1)
    out[#out + 1] = id
    out[#out + 1] = v[1]
    out[#out + 1] = v[2]
    out[#out + 1] = #kids
    for _, kid in ipairs(kids) do
      dlg_child_reply(out, prefix, kid)
    end
  end
end
return out
