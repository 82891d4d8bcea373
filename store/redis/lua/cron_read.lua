-- cron_read reads, as they stood at one instant, the jobs an index holds
-- up to a score, in its order: every job (the index of all, by id) or
-- those due (the due index, soonest first).
-- KEYS[1] the index
-- ARGV[1] key prefix
-- ARGV[2] the highest score read, '+inf' for all
-- ARGV[3] how many at most, '-1' for all
-- Returns, per job: its version and its encoding.
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[2], 'LIMIT', '0', ARGV[3])
local out = {}
for _, id in ipairs(ids) do
  local v = redis.call('HMGET', cron_key(ARGV[1], 'j:' .. id), 'v', 'j')
  if v[1] then
    out[#out + 1] = v[1]
    out[#out + 1] = v[2]
  end
end
return out
