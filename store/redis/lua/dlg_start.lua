-- dlg_start writes the dispatch of an orchestrator's workers (delegation
-- Store.Start): dlg_create's checks and its DLGPUT write, then each
-- child running at once, claimed for the owner as dlg_claim claims one
-- (a fresh token from dlg_token, the claim's expiry, its start, the
-- running set), and the delegation and its children marked as an
-- orchestrator's ('orc'):
-- their ends make no completion (dlg_complete) and add no tokens to the
-- conversation (dlg_end). The children left in the pending list are
-- dropped by dlg_claim, which takes only pending ones.
-- KEYS[1] the conversation's set of active children
-- KEYS[2] the delegation's hash
-- KEYS[3 ..] its children's hashes
-- ARGV[1] now in ms, or '' for the server's time
-- ARGV[2] the limit, 0 for none
-- ARGV[3] key prefix
-- ARGV[4] owner
-- ARGV[5] claim ttl in ms
-- ARGV[6] the shard's index, ARGV[7] the shard count ('' for the layout
--   of one server)
-- ARGV[8] w, the number of write commands, then w groups as dlg_create's
-- Returns {'OK', expires ms, then each child's token in dispatch order},
-- {'CONFLICT'}, or {'FULL', the active children}.
local refused = dlg_create_refused(KEYS, small(ARGV[2]))
if refused then
  return refused
end
refused = check_write_ops(ARGV, 8)
if refused then
  return refused
end
local now = now_ms(ARGV[1])
run_write_ops(ARGV, 8, now)
local prefix, owner = ARGV[3], ARGV[4]
local shard, count = dlg_shard(ARGV[6], ARGV[7])
local exp = int(now + tonumber(ARGV[5]))
redis.call('HSET', KEYS[2], 'orc', '1')
local out = {'OK', exp}
for i = 3, #KEYS do
  local tok = dlg_token(prefix, shard, count, 0)
  redis.call('HSET', KEYS[i], 's', 'running', 'o', owner, 'tok', int(tok), 'exp', exp, 'st', int(now), 'orc', '1')
  redis.call('ZADD', dlg_key(prefix, 'running'), exp, string.sub(KEYS[i], #dlg_key(prefix, 'c:') + 1))
  out[#out + 1] = int(tok)
end
return out
