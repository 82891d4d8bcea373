-- dlg_expired lists up to limit running children whose claim ran out by
-- the store's clock, soonest expired first, for Reap to end each with
-- dlg_end. It writes nothing.
-- KEYS: none; keys derive from the prefix (see delegation.go).
-- ARGV[1] key prefix
-- ARGV[2] limit
-- ARGV[3] now in ms, or '' for the server's time
-- Returns {now ms, then per child: id and CHILD_FIELDS}.
local prefix = ARGV[1]
local now = now_ms(ARGV[3])
local ids = redis.call('ZRANGEBYSCORE', dlg_key(prefix, 'running'), '-inf', int(now), 'LIMIT', 0, tonumber(ARGV[2]))
local out = {now}
for _, id in ipairs(ids) do
  dlg_child_reply(out, prefix, id)
end
return out
