-- cron_runs reads a job's newest runs, newest first, as they stood at
-- one instant.
-- KEYS[1] the job's runs, a sorted set of run ids scored by start (ms)
-- ARGV[1] key prefix
-- ARGV[2] how many at most, '0' for all
-- Returns the encoded runs.
local ids = redis.call('ZREVRANGE', KEYS[1], '0', int(tonumber(ARGV[2]) - 1))
local out = {}
for _, id in ipairs(ids) do
  local r = redis.call('HGET', cron_key(ARGV[1], 'r:' .. id), 'r')
  if r then
    out[#out + 1] = r
  end
end
return out
