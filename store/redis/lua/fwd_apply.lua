-- fwd_apply runs, in their home shard, the writes a commit of a
-- conversation of another shard forwarded (forward.go): the commands a
-- commit would have run itself (WRITE_OPS), checked all before the
-- first runs.
-- KEYS[1] the home shard's prefix, which names its slot
-- ARGV[1] the time in ms the writes take, or '' for the store's clock
-- ARGV[2] w, the number of write commands, then w groups: command, n,
--   the index (1-based, 0 for none) of the argument to replace with the
--   time, then n arguments, the key first (appendOps in writes.go)
-- Returns {'OK'}.
local refused = check_write_ops(ARGV, 2)
if refused then
  return refused
end
run_write_ops(ARGV, 2, now_ms(ARGV[1]))
return {'OK'}
