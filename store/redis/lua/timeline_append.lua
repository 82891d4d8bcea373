-- timeline_append adds an item to a conversation's timeline, unless an
-- item with its id is there already: then it returns that item's cursor
-- and adds nothing.
-- KEYS[1] the conversation's timeline stream
-- KEYS[2] the conversation's item id → cursor hash
-- ARGV[1] item id
-- ARGV[2] kind
-- ARGV[3] text
-- ARGV[4] now in ms, or '' for the server's time
-- ARGV[5] the inbound message id the item replies to, or ''
-- Returns {cursor}.
local first = redis.call('HGET', KEYS[2], ARGV[1])
if first then
  return {first}
end
-- The stream makes the cursor ('*'): its ids only ever grow, whatever
-- the clocks do. r is '' for an item that replies to nothing, and
-- missing from items written before it existed; both read as ''.
local cursor = redis.call('XADD', KEYS[1], '*', 'id', ARGV[1], 'k', ARGV[2], 't', ARGV[3], 'at', int(now_ms(ARGV[4])), 'r', ARGV[5])
redis.call('HSET', KEYS[2], ARGV[1], cursor)
return {cursor}
