-- cron_run_put writes a run (new or updated) and keeps only the newest
-- runs of its job (cron_run_write).
-- KEYS[1] the run's hash (fields jb its job, r the encoded run)
-- KEYS[2] its job's runs, a sorted set of run ids scored by start (ms)
-- ARGV[1] key prefix
-- ARGV[2] the run id
-- ARGV[3] its job id
-- ARGV[4] its start in ms
-- ARGV[5] the encoded run
-- ARGV[6] how many runs a job keeps
-- Returns {'OK'}.
cron_run_write(ARGV[1], KEYS[1], KEYS[2], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6])
return {'OK'}
