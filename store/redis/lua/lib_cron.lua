-- Helpers of the cron scripts (cron_*.lua); cron.go names the keys.

local function cron_key(prefix, suffix)
  return prefix .. 'cron:' .. suffix
end

-- cron_job_write writes job id's hash whole at version and files it in
-- the due index at its due time (ms), or takes it out when due is ''.
local function cron_job_write(job, due_index, id, version, body, due)
  redis.call('HSET', job, 'v', version, 'j', body)
  if due == '' then
    redis.call('ZREM', due_index, id)
  else
    redis.call('ZADD', due_index, due, id)
  end
end

-- cron_run_write writes run id of job (new or updated) to its hash run,
-- indexes it in runs, the job's runs scored by start (ms), and keeps
-- only the keep newest: equal starts order by run id, so the index's
-- lowest ranks are the oldest.
local function cron_run_write(prefix, run, runs, id, job, start, body, keep)
  local old = redis.call('HGET', run, 'jb')
  if old and old ~= job then
    redis.call('ZREM', cron_key(prefix, 'runs:' .. old), id)
  end
  redis.call('HSET', run, 'jb', job, 'r', body)
  redis.call('ZADD', runs, start, id)
  local over = redis.call('ZCARD', runs) - tonumber(keep)
  if over > 0 then
    local gone = redis.call('ZRANGE', runs, '0', int(over - 1))
    for i = 1, #gone do
      gone[i] = cron_key(prefix, 'r:' .. gone[i])
    end
    call_all('DEL', nil, gone, 1, #gone)
    redis.call('ZREMRANGEBYRANK', runs, '0', int(over - 1))
  end
end
