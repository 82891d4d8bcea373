-- ctl_read reads, as they stood at one instant, the controllers' states
-- an index holds up to a score, in its order: a conversation's (its
-- index, by kind then id) or those due (the due index, soonest first).
-- KEYS[1] the index
-- ARGV[1] key prefix (a member and the prefix are a state's hash)
-- ARGV[2] the highest score read, '+inf' for all
-- ARGV[3] how many at most, '-1' for all
-- Returns, per state: its conv, kind, id, data, due ms or '', version
-- and updated ms.
local members = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[2], 'LIMIT', '0', ARGV[3])
local out = {}
for _, m in ipairs(members) do
  local f = redis.call('HMGET', ARGV[1] .. m, 'c', 'k', 'i', 'd', 't', 'v', 'u')
  if f[6] then
    for i = 1, 7 do
      out[#out + 1] = f[i]
    end
  end
end
return out
