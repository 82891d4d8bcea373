-- dlg_create writes a dispatch made outside a turn (delegation
-- Store.Create): the DLGPUT write a turn's commit runs for it (writes.go,
-- dispatchOp), unless the delegation or one of its children exists, or
-- its children do not fit under its limit beside the conversation's
-- active ones, counted here.
-- KEYS[1] the conversation's set of active children
-- KEYS[2] the delegation's hash
-- KEYS[3 ..] its children's hashes
-- ARGV[1] now in ms, or '' for the server's time
-- ARGV[2] the limit, 0 for none
-- ARGV[3] w, the number of write commands, then w groups: command, n,
--   the index (1-based, 0 for none) of the argument to replace with the
--   time in ms, then n arguments, the key first (appendOps in writes.go)
-- Returns {'OK'}, {'CONFLICT'}, or {'FULL', the active children}.
local refused = dlg_create_refused(KEYS, small(ARGV[2]))
if refused then
  return refused
end
refused = check_write_ops(ARGV, 3)
if refused then
  return refused
end
run_write_ops(ARGV, 3, now_ms(ARGV[1]))
return {'OK'}
