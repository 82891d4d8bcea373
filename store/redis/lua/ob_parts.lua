-- ob_parts records how far a message sent in parts got, under its claim.
-- KEYS: none; keys derive from the prefix (see doc.go).
-- ARGV[1] key prefix
-- ARGV[2] message id
-- ARGV[3] claim token
-- ARGV[4] the encoded outbox.Parts
-- Returns {'OK'}, {'LOST'} or {'NOTFOUND'}.
local mkey = ob_key(ARGV[1], 'm:' .. ARGV[2])
local _, err = ob_check(mkey, ARGV[3])
if err then
  return {err}
end
redis.call('HSET', mkey, 'pg', ARGV[4])
return {'OK'}
