-- q_release gives a lease back. A conversation with work left is ready
-- again, behind the ones already waiting; one without work is not in the
-- ready index (its last entry took it out), so there is nothing to remove.
-- KEYS[1] conversation state hash
-- KEYS[2] ready sorted set
-- ARGV[1] conversation tag
-- ARGV[2] lease token
-- ARGV[3] now in ms, or '' for the server's time
-- Returns {'LOST'} or {'OK'}.
local v = redis.call('HMGET', KEYS[1], 'token', 'lanes')
if v[1] ~= ARGV[2] then
  return {'LOST'}
end
redis.call('HSET', KEYS[1], 'worker', '', 'token', '', 'exp', '')
if v[2] and v[2] ~= '' then
  redis.call('ZADD', KEYS[2], int(now_ms(ARGV[3])), ARGV[1])
end
return {'OK'}
