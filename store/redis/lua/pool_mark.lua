-- pool_mark marks a key of a credential pool cooling or dead, only ever
-- lengthening what is kept: a later, shorter cooling (an in-flight
-- request's failure on a key already set aside) leaves the longer one,
-- and a dead mark stays until pool_revive. The uses are kept.
-- KEYS[1] the pool's hash
-- ARGV[1] the key's id
-- ARGV[2] cooling until, ms ('0': no cooling)
-- ARGV[3] the class that cooled or killed it
-- ARGV[4] the dead mark ('' when the mark does not kill the key)
local c = tonumber(redis.call('HGET', KEYS[1], ARGV[1] .. ':c') or '0') or 0
local d = redis.call('HGET', KEYS[1], ARGV[1] .. ':d') or ''
local want = tonumber(ARGV[2])
if ARGV[4] ~= '' or (d == '' and want > c) then
  redis.call('HSET', KEYS[1], ARGV[1] .. ':r', ARGV[3])
end
if want > c then
  redis.call('HSET', KEYS[1], ARGV[1] .. ':c', ARGV[2])
end
if ARGV[4] ~= '' then
  redis.call('HSET', KEYS[1], ARGV[1] .. ':d', ARGV[4])
end
return {'OK'}
