-- ob_beat keeps a delivery worker's heartbeat: its expiry in ob:workers,
-- by which ob_claim tells a worker that died and ends its claims, and how
-- long a beat holds in ob:beats, by which the worker's own claims renew
-- it. Beat calls it in every shard, as a worker may hold claims in any.
-- KEYS: none; keys derive from the prefix (see doc.go).
-- ARGV[1] key prefix
-- ARGV[2] worker name
-- ARGV[3] ttl in ms; 0 forgets the worker (it leaves)
-- ARGV[4] now in ms, or '' for the server's time
-- Returns {'OK'}.
local workers = ob_key(ARGV[1], 'workers')
local beats = ob_key(ARGV[1], 'beats')
local ttl = tonumber(ARGV[3])
if ttl <= 0 then
  redis.call('ZREM', workers, ARGV[2])
  redis.call('HDEL', beats, ARGV[2])
else
  redis.call('ZADD', workers, now_ms(ARGV[4]) + ttl, ARGV[2])
  redis.call('HSET', beats, ARGV[2], ttl)
end
return {'OK'}
