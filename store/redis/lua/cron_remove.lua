-- cron_remove deletes a job, its place in both indexes and its runs.
-- KEYS[1] the job's hash
-- KEYS[2] the index of every job
-- KEYS[3] the due index
-- KEYS[4] the job's runs (a sorted set of run ids)
-- ARGV[1] key prefix
-- ARGV[2] the job id
-- Returns {'OK'} or {'NOTFOUND'}.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return {'NOTFOUND'}
end
local runs = redis.call('ZRANGE', KEYS[4], '0', '-1')
for i = 1, #runs do
  runs[i] = cron_key(ARGV[1], 'r:' .. runs[i])
end
call_all('DEL', nil, runs, 1, #runs)
redis.call('DEL', KEYS[1], KEYS[4])
redis.call('ZREM', KEYS[2], ARGV[2])
redis.call('ZREM', KEYS[3], ARGV[2])
return {'OK'}
