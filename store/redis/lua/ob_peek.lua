-- ob_peek tells a claim that goes round the shards (Claim in a sharded
-- layout, see outbox.go) whether this shard has a message for it and how
-- old the oldest is, so that shards are claimed from oldest first and a
-- shard with nothing is not claimed from at all. It renews the claimer's
-- heartbeat as ob_claim does, so a claim renews it in every shard,
-- whichever it then takes messages from. A message counts when it is
-- due for the given platforms, waits for this worker and is due, or its
-- claim (handed or not) ran out; another worker whose heartbeat ran out
-- counts as due at 0, since ob_claim ends its claims. Whether a message
-- waits behind an earlier one to its target is for ob_claim to find.
-- KEYS: none; keys derive from the prefix (see doc.go).
-- ARGV[1] key prefix
-- ARGV[2] worker name
-- ARGV[3] now in ms, or '' for the server's time
-- ARGV[4 ..] platforms
-- Returns {} or {the oldest due time found, ms}.
local prefix, worker = ARGV[1], ARGV[2]
local now = now_ms(ARGV[3])
local workers = ob_renew(prefix, worker, now)
for _, w in ipairs(redis.call('ZRANGEBYSCORE', workers, '-inf', now, 'LIMIT', 0, 2)) do
  if w ~= worker then
    return {0}
  end
end
local oldest
local function seen(at)
  at = tonumber(at)
  if at and (not oldest or at < oldest) then
    oldest = at
  end
end
-- The next attempt of the first message of a claim index whose claim ran
-- out: it is due again at that time.
local function lapsed(key)
  local id = redis.call('ZRANGEBYSCORE', key, '-inf', now, 'LIMIT', 0, 1)[1]
  if id then
    seen(redis.call('HGET', ob_key(prefix, 'm:' .. id), 'next'))
  end
end
lapsed(ob_key(prefix, 'handed'))
local named = {}
for i = 4, #ARGV do
  named[ARGV[i]] = true
  local due = redis.call('ZRANGEBYSCORE', ob_key(prefix, 'due:' .. ARGV[i]), '-inf', now, 'WITHSCORES', 'LIMIT', 0, 1)
  seen(due[2])
  lapsed(ob_key(prefix, 'claimed:' .. ARGV[i]))
end
for _, id in ipairs(redis.call('ZRANGE', ob_key(prefix, 'waits:' .. worker), 0, 63)) do
  local v = redis.call('HMGET', ob_key(prefix, 'm:' .. id), 'wf', 'p', 'next')
  if v[1] == worker and named[v[2]] and (tonumber(v[3]) or now + 1) <= now then
    seen(v[3])
  end
end
if not oldest then
  return {}
end
return {oldest}
