-- ob_beat keeps a delivery worker's heartbeat: its expiry in ob:workers,
-- by which ob_claim tells a worker that died and ends its claims.
-- KEYS: none; keys derive from the prefix (see doc.go).
-- ARGV[1] key prefix
-- ARGV[2] worker name
-- ARGV[3] ttl in ms; 0 forgets the worker (it leaves)
-- ARGV[4] now in ms, or '' for the server's time
-- Returns {'OK'}.
local workers = ob_key(ARGV[1], 'workers')
local ttl = tonumber(ARGV[3])
if ttl <= 0 then
  redis.call('ZREM', workers, ARGV[2])
else
  redis.call('ZADD', workers, now_ms(ARGV[4]) + ttl, ARGV[2])
end
return {'OK'}
