-- cron_fire_end is a cron fire's end in one call: the run written as it
-- ended, the job written with it as its last run over the version the
-- scheduler read, and the fire's claim marked done (once_mark_done). It
-- writes all of it or, when the claim is not the fire's current one or
-- the job moved on, nothing.
-- KEYS[1] the fire's hash (once.go)
-- KEYS[2] the index of the fires not done, scored by claim expiry (ms)
-- KEYS[3] the job's hash (fields v version, j the encoded job)
-- KEYS[4] the due index, scored by due time (ms)
-- KEYS[5] the run's hash (fields jb its job, r the encoded run)
-- KEYS[6] the job's runs, a sorted set of run ids scored by start (ms)
-- ARGV[1] key prefix
-- ARGV[2] the fire id
-- ARGV[3] the claim token
-- ARGV[4] the dedupe window in ms
-- ARGV[5] now in ms, or '' for the server's time
-- ARGV[6] the job id
-- ARGV[7] the job's version the scheduler read, or '' to leave the job
-- ARGV[8] its new version
-- ARGV[9] the job encoded at its new version
-- ARGV[10] its due time in ms, or '' when it wants no fire
-- ARGV[11] the run id
-- ARGV[12] the run's start in ms
-- ARGV[13] the encoded run
-- ARGV[14] how many runs a job keeps
-- Returns {'OK'}, {'LOST'}, {'NOTFOUND'} (no such fire), {'NOJOB'} or
-- {'CONFLICT'}.
local check = once_check_done(KEYS[1], ARGV[3])
if check == 'LOST' or check == 'NOTFOUND' then
  return {check}
end
if ARGV[7] ~= '' then
  local v = redis.call('HGET', KEYS[3], 'v')
  if not v then
    return {'NOJOB'}
  elseif v ~= ARGV[7] then
    return {'CONFLICT'}
  end
  cron_job_write(KEYS[3], KEYS[4], ARGV[6], ARGV[8], ARGV[9], ARGV[10])
end
cron_run_write(ARGV[1], KEYS[5], KEYS[6], ARGV[11], ARGV[6], ARGV[12], ARGV[13], ARGV[14])
if check == 'OK' then
  once_mark_done(KEYS[1], KEYS[2], ARGV[2], ARGV[4], now_ms(ARGV[5]))
end
return {'OK'}
