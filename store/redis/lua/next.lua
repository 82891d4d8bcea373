-- next returns the held conversation's next entry, as claim orders them.
-- KEYS[1] conversation state hash
-- ARGV[1] key prefix
-- ARGV[2] conversation tag
-- ARGV[3] lease token
-- Returns {'LOST'}, {'OK'} when the queue is empty, or
-- {'OK', entry id, entry data, enqueued ms, deliveries}.
if not lease_ok(KEYS[1], ARGV[3]) then
  return {'LOST'}
end
local e = next_entry(ARGV[1], ARGV[2], KEYS[1])
if not e then
  return {'OK'}
end
return {'OK', e[1], e[2], e[3], e[4]}
