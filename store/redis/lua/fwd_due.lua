-- fwd_due reads the forwarded writes a shard recorded (forward.go) that
-- are older than an age by the store's clock, the oldest first.
-- KEYS[1] the shard's forwarded writes (sorted set: record → the
--   commit's time in ms)
-- ARGV[1] now in ms, or '' for the server's time
-- ARGV[2] the age in ms
-- ARGV[3] how many at most
-- Returns per record: the record, the commit's time in ms.
local upto = int(now_ms(ARGV[1]) - tonumber(ARGV[2]))
local got = redis.call('ZRANGE', KEYS[1], '-inf', upto, 'BYSCORE', 'LIMIT', '0', ARGV[3], 'WITHSCORES')
for i = 2, #got, 2 do
  got[i] = int(tonumber(got[i]))
end
return got
