-- appr_read reads, as they stood at one instant, the approvals an index
-- holds, in its order or the reverse.
-- KEYS[1] the index: a conversation's or every pending or decided
--         approval
-- ARGV[1] key prefix (an approval's hash is the prefix, 'appr:a:' and
--         its id)
-- ARGV[2] '1' to read from the highest score down, else from the lowest
-- ARGV[3] the last rank read, '-1' for all
-- Returns, per approval: its encoding as asked, decision, by, at ns and
-- message id ('' for those it has not).
local ids
if ARGV[2] == '1' then
  ids = redis.call('ZREVRANGE', KEYS[1], '0', ARGV[3])
else
  ids = redis.call('ZRANGE', KEYS[1], '0', ARGV[3])
end
local out = {}
for _, id in ipairs(ids) do
  local f = redis.call('HMGET', ARGV[1] .. 'appr:a:' .. id, 'b', 'd', 'by', 'at', 'm')
  if f[1] then
    for i = 1, 5 do
      out[#out + 1] = f[i] or ''
    end
  end
end
return out
