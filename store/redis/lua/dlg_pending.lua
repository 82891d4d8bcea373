-- dlg_pending reads what a claim across shards needs to know of one
-- shard before it claims (delegation.go, claimShards): the shard's token
-- counter, and when each of its first n pending children was dispatched
-- (its delegation's creation ms and dispatch sequence), so that the
-- claim takes the oldest of all shards and grants tokens above every
-- shard's. Its one write: children at the head of the pending list that
-- are not pending any more (an orchestrator's workers, dlg_start) are
-- dropped, as dlg_claim drops them, since a shard with nothing pending
-- is not claimed from; others are passed over within the bound
-- dlg_claim drops them within.
-- KEYS: none; keys derive from the prefix (see delegation.go).
-- ARGV[1] key prefix (the shard's)
-- ARGV[2] n
-- Returns {the token counter, then per pending child in list order its
-- delegation's creation ms and dispatch sequence}.
local prefix, n = ARGV[1], tonumber(ARGV[2])
local pending = dlg_key(prefix, 'pending')
local out = {redis.call('GET', dlg_key(prefix, 'tok')) or '0'}
local dropped = 0
while dropped < n + 1000 do
  local id = redis.call('LINDEX', pending, 0)
  if not id or redis.call('HGET', dlg_key(prefix, 'c:' .. id), 's') == 'pending' then
    break
  end
  redis.call('LPOP', pending)
  dropped = dropped + 1
end
local from = 0
while #out <= 2 * n and from < n + 1000 do
  local ids = redis.call('LRANGE', pending, from, from + n - 1)
  if #ids == 0 then
    break
  end
  for _, id in ipairs(ids) do
    local v = redis.call('HMGET', dlg_key(prefix, 'c:' .. id), 's', 'd')
    if v[1] == 'pending' then
      local d = redis.call('HMGET', dlg_key(prefix, 'd:' .. v[2]), 'at', 'q')
      out[#out + 1] = d[1]
      out[#out + 1] = d[2]
      if #out > 2 * n then
        break
      end
    end
  end
  from = from + #ids
end
return out
