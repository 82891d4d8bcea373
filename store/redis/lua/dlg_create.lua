-- dlg_create writes a dispatch made outside a turn (delegation
-- Store.Create): the same commands a turn's commit runs for it (writes.go,
-- dispatchOps), unless the delegation or one of its children exists.
-- KEYS[1] the delegation's hash
-- KEYS[2 ..] its children's hashes
-- ARGV[1] now in ms, or '' for the server's time
-- ARGV[2] w, the number of write commands, then w groups: command, n,
--   the index (1-based, 0 for none) of the argument to replace with the
--   time in ms, then n arguments, the key first (appendOps in writes.go)
-- Returns {'OK'} or {'CONFLICT'}.
for i = 1, #KEYS do
  if redis.call('EXISTS', KEYS[i]) == 1 then
    return {'CONFLICT'}
  end
end
local refused = check_write_ops(ARGV, 2)
if refused then
  return refused
end
run_write_ops(ARGV, 2, now_ms(ARGV[1]))
return {'OK'}
