-- dlg_completions reads a delegation's completions, delivered or not, in
-- the order they were made.
-- KEYS: none; keys derive from the prefix (see delegation.go).
-- ARGV[1] key prefix
-- ARGV[2] delegation id
-- Returns, per completion: id, CMP_FIELDS and the delegation's body.
local prefix = ARGV[1]
local out = {}
for _, cid in ipairs(redis.call('LRANGE', dlg_key(prefix, 'cmps:' .. ARGV[2]), 0, -1)) do
  dlg_cmp_reply(out, prefix, cid)
end
return out
