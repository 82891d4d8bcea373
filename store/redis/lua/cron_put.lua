-- cron_put writes a job whole: a new one (CreateJob) unless its id
-- exists, or (UpdateJob) over the stored one only while its version is
-- the one the writer read; and files it in the due index at its due
-- time, or takes it out when it wants no fire.
-- KEYS[1] the job's hash (fields v version, j the encoded job)
-- KEYS[2] the index of every job (all scored 0, so ordered by id)
-- KEYS[3] the due index, scored by due time (ms)
-- ARGV[1] the job id
-- ARGV[2] the version the writer read, or '' to create
-- ARGV[3] the new version
-- ARGV[4] the job encoded at the new version
-- ARGV[5] its due time in ms, or '' when it wants no fire
-- Returns {'OK'}, {'CONFLICT'} or {'NOTFOUND'}.
local v = redis.call('HGET', KEYS[1], 'v')
if ARGV[2] == '' then
  if v then
    return {'CONFLICT'}
  end
  redis.call('ZADD', KEYS[2], '0', ARGV[1])
elseif not v then
  return {'NOTFOUND'}
elseif v ~= ARGV[2] then
  return {'CONFLICT'}
end
cron_job_write(KEYS[1], KEYS[3], ARGV[1], ARGV[3], ARGV[4], ARGV[5])
return {'OK'}
