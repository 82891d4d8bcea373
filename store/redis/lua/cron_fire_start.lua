-- cron_fire_start is a cron fire's start in one call: it claims the fire
-- once-only (once_claim_fire); when it claimed it or found it done, it
-- writes the job moved past the fire, over the version the scheduler
-- read; when it claimed it and the job was written (or none was given),
-- it reads the fire's run record from an earlier attempt and, when there
-- is none, writes the run as it starts. A job whose version moved on or
-- that is gone leaves all but the claim unwritten.
-- KEYS[1] the fire's hash (once.go)
-- KEYS[2] the index of the fires not done, scored by claim expiry (ms)
-- KEYS[3] the claim token counter
-- KEYS[4] the job's hash (fields v version, j the encoded job)
-- KEYS[5] the due index, scored by due time (ms)
-- KEYS[6] the run's hash (fields jb its job, r the encoded run)
-- KEYS[7] the job's runs, a sorted set of run ids scored by start (ms)
-- ARGV[1] key prefix
-- ARGV[2] the fire id
-- ARGV[3] the owner
-- ARGV[4] the claim ttl in ms
-- ARGV[5] now in ms, or '' for the server's time
-- ARGV[6] the job id
-- ARGV[7] the job's version the scheduler read, or '' to leave the job
-- ARGV[8] its new version
-- ARGV[9] the job encoded at its new version
-- ARGV[10] its due time in ms, or '' when it wants no fire
-- ARGV[11] the run id
-- ARGV[12] the run's start in ms
-- ARGV[13] the encoded run as it starts, or '' to write none
-- ARGV[14] how many runs a job keeps
-- Returns {state, owner, token, expiry ms, moved, prior, started}: state
-- 'CLAIMED', 'HELD' (owner, token and expiry the holder's) or 'DONE';
-- moved 1 when the job was written; prior the earlier attempt's encoded
-- run or ''; started 1 when the run was written.
local state, owner, tok, exp = once_claim_fire(KEYS[1], KEYS[2], KEYS[3], ARGV[2], ARGV[3],
  tonumber(ARGV[4]), now_ms(ARGV[5]))
if state == 'HELD' then
  return {state, owner, tok, exp, 0, '', 0}
end
owner, tok, exp = owner or '', tok or 0, exp or 0
local moved = 0
if ARGV[7] ~= '' then
  if redis.call('HGET', KEYS[4], 'v') ~= ARGV[7] then
    return {state, owner, tok, exp, 0, '', 0}
  end
  cron_job_write(KEYS[4], KEYS[5], ARGV[6], ARGV[8], ARGV[9], ARGV[10])
  moved = 1
end
if state == 'DONE' then
  return {state, owner, tok, exp, moved, '', 0}
end
local prior = redis.call('HGET', KEYS[6], 'r')
if prior then
  return {state, owner, tok, exp, moved, prior, 0}
end
if ARGV[13] == '' then
  return {state, owner, tok, exp, moved, '', 0}
end
cron_run_write(ARGV[1], KEYS[6], KEYS[7], ARGV[11], ARGV[6], ARGV[12], ARGV[13], ARGV[14])
return {state, owner, tok, exp, moved, '', 1}
