-- q_depth counts the entries of the turn queues, waiting or being
-- run, up to a limit: the lane counts of the conversations in the ready
-- index, which holds every conversation that has entries.
-- KEYS[1] ready sorted set
-- ARGV[1] key prefix
-- ARGV[2] limit, 1 or more
-- Returns {the count}, at most the limit.
local limit = tonumber(ARGV[2])
local tags = redis.call('ZRANGE', KEYS[1], '0', int(limit - 1))
local n = 0
for _, tag in ipairs(tags) do
  local v = redis.call('HMGET', conv_key(ARGV[1], tag, 'state'), 'n0', 'n1', 'n2', 'n3', 'n4', 'n5')
  for lane = 1, LANES do
    n = n + small(v[lane])
  end
  if n >= limit then
    return {limit}
  end
end
return {n}
