-- q_history appends messages to a conversation's history under its lease.
-- KEYS[1] conversation state hash
-- KEYS[2] history list
-- ARGV[1] lease token
-- ARGV[2 ..] encoded messages
-- Returns {'LOST'} or {'OK'}.
if redis.call('HGET', KEYS[1], 'token') ~= ARGV[1] then
  return {'LOST'}
end
if #ARGV > 1 then
  -- The state keeps the history's length (hl; see q_append).
  redis.call('HSET', KEYS[1], 'hl', int(call_all('RPUSH', KEYS[2], ARGV, 2, #ARGV - 1)))
end
return {'OK'}
