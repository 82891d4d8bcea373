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

-- CRONNEW, the write a turn's commit makes of a new job (cronjobs.Create,
-- createJobOps in cron.go), writes the job at version 1 in both indexes
-- unless its hash exists: applied a second time, as a write forwarded to
-- the job's shard may be after a crash, it changes nothing.
--   a[1] the job's hash, a[2] the index of every job, a[3] the due
--   index, a[4] the job id, a[5] its encoding, a[6] its due time in ms
--   or '' when it wants no fire
WRITE_OPS.CRONNEW = function(a)
  if redis.call('EXISTS', a[1]) == 1 then
    return
  end
  redis.call('ZADD', a[2], '0', a[4])
  cron_job_write(a[1], a[3], a[4], '1', a[5], a[6])
end
