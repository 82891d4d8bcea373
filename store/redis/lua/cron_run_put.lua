-- cron_run_put writes a run (new or updated) and keeps only the newest
-- runs of its job: the index of a job's runs is scored by start, and
-- equal starts order by run id, so its lowest ranks are the oldest.
-- KEYS[1] the run's hash (fields jb its job, r the encoded run)
-- KEYS[2] its job's runs, a sorted set of run ids scored by start (ms)
-- ARGV[1] key prefix
-- ARGV[2] the run id
-- ARGV[3] its job id
-- ARGV[4] its start in ms
-- ARGV[5] the encoded run
-- ARGV[6] how many runs a job keeps
-- Returns {'OK'}.
local prefix, id, job = ARGV[1], ARGV[2], ARGV[3]
local old = redis.call('HGET', KEYS[1], 'jb')
if old and old ~= job then
  redis.call('ZREM', cron_key(prefix, 'runs:' .. old), id)
end
redis.call('HSET', KEYS[1], 'jb', job, 'r', ARGV[5])
redis.call('ZADD', KEYS[2], ARGV[4], id)
local over = redis.call('ZCARD', KEYS[2]) - tonumber(ARGV[6])
if over > 0 then
  local gone = redis.call('ZRANGE', KEYS[2], '0', int(over - 1))
  for i = 1, #gone do
    gone[i] = cron_key(prefix, 'r:' .. gone[i])
  end
  call_all('DEL', nil, gone, 1, #gone)
  redis.call('ZREMRANGEBYRANK', KEYS[2], '0', int(over - 1))
end
return {'OK'}
