-- inst_beat records a gateway process in the roll of instances, alive
-- until ttl from now, last seen now, and deletes the records that ran
-- out (inst_list leaves them).
-- KEYS[1] the roll's hash
-- ARGV[1] the instance id
-- ARGV[2] the encoded instance
-- ARGV[3] its ttl in ms
-- ARGV[4] now in ms, or '' for the server's time
-- Returns {now in ms}.
local now = now_ms(ARGV[4])
local all = redis.call('HGETALL', KEYS[1])
for i = 1, #all, 2 do
  local exp = string.match(all[i + 1], '^(%d+)|')
  if all[i] ~= ARGV[1] and not (exp and tonumber(exp) > now) then
    redis.call('HDEL', KEYS[1], all[i])
  end
end
redis.call('HSET', KEYS[1], ARGV[1], int(now + tonumber(ARGV[3])) .. '|' .. int(now) .. '|' .. ARGV[2])
return {now}
