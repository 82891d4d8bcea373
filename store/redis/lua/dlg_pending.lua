-- dlg_pending reads, writing nothing, what a claim across shards needs
-- to know of one shard before it claims (delegation.go, claimShards):
-- the shard's token counter, and when each of its first n pending
-- children was dispatched, so that the claim takes the oldest of all
-- shards and grants tokens above every shard's. Children in the pending
-- list that are not pending any more are passed over within the bound
-- dlg_claim drops them within.
-- KEYS: none; keys derive from the prefix (see delegation.go).
-- ARGV[1] key prefix (the shard's)
-- ARGV[2] n
-- Returns {the token counter, then per pending child in list order its
-- delegation's creation ms}.
local prefix, n = ARGV[1], tonumber(ARGV[2])
local pending = dlg_key(prefix, 'pending')
local out = {redis.call('GET', dlg_key(prefix, 'tok')) or '0'}
local from = 0
while #out <= n and from < n + 1000 do
  local ids = redis.call('LRANGE', pending, from, from + n - 1)
  if #ids == 0 then
    break
  end
  for _, id in ipairs(ids) do
    local v = redis.call('HMGET', dlg_key(prefix, 'c:' .. id), 's', 'd')
    if v[1] == 'pending' then
      out[#out + 1] = redis.call('HGET', dlg_key(prefix, 'd:' .. v[2]), 'at')
      if #out > n then
        break
      end
    end
  end
  from = from + #ids
end
return out
