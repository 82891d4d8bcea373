-- dlg_claim takes up to n pending children of its shard, oldest dispatch
-- first, for an owner: each becomes running, with a fresh claim token
-- (dlg_token: above every token the shard granted before, and naming
-- the shard), its claim's expiry and its start, and goes into the
-- running set scored by that expiry.
-- KEYS: none; keys derive from the prefix (see delegation.go).
-- ARGV[1] key prefix (the shard's)
-- ARGV[2] owner
-- ARGV[3] n
-- ARGV[4] claim ttl in ms
-- ARGV[5] now in ms, or '' for the server's time
-- ARGV[6] the shard's index, ARGV[7] the shard count ('' for the layout
--   of one server)
-- ARGV[8 ..] the least token of each child taken, in order, so that a
--   claim across shards grants tokens rising in the order it answers
--   (delegation.go, claimShards); a child past them: any
-- Returns {expires ms, then per child taken: id and CHILD_FIELDS}.
local prefix, owner, n = ARGV[1], ARGV[2], tonumber(ARGV[3])
local now = now_ms(ARGV[5])
local exp = int(now + tonumber(ARGV[4]))
local shard, count = dlg_shard(ARGV[6], ARGV[7])
local pending = dlg_key(prefix, 'pending')
local running = dlg_key(prefix, 'running')
local out = {exp}
-- The pending list holds only pending children, in dispatch order; one
-- that is not pending any more is dropped, within a bound, so a claim
-- never walks a long list.
local got, popped = 0, 0
while got < n and popped < n + 1000 do
  local id = redis.call('LPOP', pending)
  if not id then
    break
  end
  popped = popped + 1
  local ckey = dlg_key(prefix, 'c:' .. id)
  if redis.call('HGET', ckey, 's') == 'pending' then
    local tok = dlg_token(prefix, shard, count, tonumber(ARGV[8 + got]) or 0)
    redis.call('HSET', ckey, 's', 'running', 'o', owner, 'tok', int(tok), 'exp', exp, 'st', int(now))
    redis.call('ZADD', running, exp, id)
    dlg_child_reply(out, prefix, id)
    got = got + 1
  end
end
return out
