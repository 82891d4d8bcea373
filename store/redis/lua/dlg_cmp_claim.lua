-- dlg_cmp_claim takes up to n due completions, soonest due first, for a
-- deliverer: each gets a fresh claim token (its own counter, one up),
-- the deliverer and the claim's expiry, and its score in the due set
-- moves to that expiry, so it is due again only once the claim ran out.
-- KEYS: none; keys derive from the prefix (see delegation.go).
-- ARGV[1] key prefix
-- ARGV[2] worker
-- ARGV[3] n
-- ARGV[4] claim ttl in ms
-- ARGV[5] now in ms, or '' for the server's time
-- Returns {expires ms, then per completion: id, CMP_FIELDS and the
-- delegation's body}.
local prefix, worker = ARGV[1], ARGV[2]
local now = now_ms(ARGV[5])
local exp = int(now + tonumber(ARGV[4]))
local due = dlg_key(prefix, 'due')
local ids = redis.call('ZRANGEBYSCORE', due, '-inf', int(now), 'LIMIT', 0, tonumber(ARGV[3]))
local out = {exp}
for _, cid in ipairs(ids) do
  local mkey = dlg_key(prefix, 'cmp:' .. cid)
  if redis.call('HGET', mkey, 'st') == 'pending' then
    redis.call('HINCRBY', mkey, 'tok', 1)
    redis.call('HSET', mkey, 'w', worker, 'exp', exp)
    redis.call('ZADD', due, exp, cid)
    dlg_cmp_reply(out, prefix, cid)
  else
    -- Delivered completions leave the due set as they are acked; one
    -- found there anyway is only dropped.
    redis.call('ZREM', due, cid)
  end
end
return out
