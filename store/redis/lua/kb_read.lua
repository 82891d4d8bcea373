-- kb_read reads cards with their links as they stood at one instant:
-- those named, or every card of a board in the statuses named.
-- ARGV[1] key prefix
-- ARGV[2] 'ids' or 'board'
-- ARGV[3 ..] the ids; or the board, then its statuses
-- Returns, per card found, what kb_card_reply adds.
local prefix = ARGV[1]
local out = {}
if ARGV[2] == 'ids' then
  for i = 3, #ARGV do
    kb_card_reply(out, prefix, ARGV[i])
  end
  return out
end
for i = 4, #ARGV do
  for _, id in ipairs(redis.call('SMEMBERS', kb_key(prefix, 'st:' .. ARGV[3] .. ':' .. ARGV[i]))) do
    kb_card_reply(out, prefix, id)
  end
end
return out
