-- tl_append adds an item to a conversation's timeline, unless an
-- item with its id is there already: then it returns that item's cursor
-- and adds nothing. Given a bound, it then drops the oldest items beyond
-- it, their ids with them, at most 1000 of them: a bound set on a
-- long timeline is reached over several appends, none of which holds the
-- server for long.
-- KEYS[1] the conversation's timeline stream
-- KEYS[2] the conversation's item id → cursor hash
-- ARGV[1] item id
-- ARGV[2] kind
-- ARGV[3] text
-- ARGV[4] now in ms, or '' for the server's time
-- ARGV[5] the inbound message id the item replies to, or ''
-- ARGV[6] how many items the timeline keeps, or '0' for all
-- ARGV[7] the item's meta as JSON, or '' for none
-- ARGV[8] the files the item sent as JSON, or '' for none
-- Returns {cursor}.
local first = redis.call('HGET', KEYS[2], ARGV[1])
if first then
  return {first}
end
-- The stream makes the cursor ('*'): its ids only ever grow, whatever
-- the clocks do. r is '' for an item that replies to nothing, m for one
-- with no meta and f for one that sent no files; each is missing from
-- items written before it existed, and read as ''.
local cursor = redis.call('XADD', KEYS[1], '*', 'id', ARGV[1], 'k', ARGV[2], 't', ARGV[3], 'at', int(now_ms(ARGV[4])), 'r', ARGV[5], 'm', ARGV[7], 'f', ARGV[8])
redis.call('HSET', KEYS[2], ARGV[1], cursor)
local keep = small(ARGV[6])
if keep > 0 then
  local over = math.min(redis.call('XLEN', KEYS[1]) - keep, 1000)
  if over > 0 then
    -- Each item's first field is its id (the XADD above writes it so).
    local ids, cursors = {}, {}
    for i, e in ipairs(redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', over)) do
      cursors[i], ids[i] = e[1], e[2][2]
    end
    call_all('HDEL', KEYS[2], ids, 1, #ids)
    call_all('XDEL', KEYS[1], cursors, 1, #cursors)
  end
end
return {cursor}
