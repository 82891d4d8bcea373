-- next returns the held conversation's next entry, as claim orders them.
-- KEYS[1] conversation state hash
-- ARGV[1] key prefix
-- ARGV[2] conversation tag
-- ARGV[3] lease token
-- Returns {'LOST'}, {'OK'} when the queue is empty, or
-- {'OK', entry id, entry data, enqueued ms, deliveries}.
local st = load_state(KEYS[1])
if st.token ~= ARGV[3] then
  return {'LOST'}
end
local e, pend = next_entry(ARGV[1], ARGV[2], KEYS[1], st)
if not e then
  return {'OK'}
end
if pend then
  redis.call('HSET', KEYS[1], 'pend', pend)
end
return {'OK', e[1], e[2], e[3], e[4]}
