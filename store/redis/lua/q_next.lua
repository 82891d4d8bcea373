-- q_next returns the held conversation's next entry, as q_claim orders
-- them.
-- KEYS[1] conversation state hash
-- ARGV[1] key prefix
-- ARGV[2] conversation tag
-- ARGV[3] lease token
-- ARGV[4] now in ms, or '' for the server's time
-- Returns {'LOST'}, {'OK'} when the queue is empty, or
-- {'OK', entry id, entry data, enqueued ms, deliveries}.
local v = redis.call('HMGET', KEYS[1], 'token', 'pend', 'dlv', 'lanes')
if v[1] ~= ARGV[3] then
  return {'LOST'}
end
local id, data, at, deliveries = next_entry(ARGV[1], ARGV[2], KEYS[1], v[2], v[3], v[4] or '')
if not id then
  return {'OK'}
end
if id == v[2] then
  -- Handed out again under the same lease: since it was handed out first.
  redis.call('HSET', KEYS[1], 'dlv', deliveries)
else
  redis.call('HSET', KEYS[1], 'pend', id, 'dlv', deliveries, 'pst', int(now_ms(ARGV[4])))
end
return {'OK', id, data, at, deliveries}
