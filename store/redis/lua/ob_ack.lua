-- ob_ack removes messages the platform accepted, each only while its claim
-- holds, each on its own: one whose claim was lost does not keep the others
-- from being acked.
-- KEYS: none; keys derive from the prefix (see doc.go).
-- ARGV[1] key prefix
-- ARGV[2 ..] pairs of message id and claim token
-- Returns a status per pair, in order: 'OK', 'LOST' or 'NOTFOUND'.
local prefix = ARGV[1]
local all = ob_key(prefix, 'all')
local out = {}
for i = 2, #ARGV, 2 do
  local id = ARGV[i]
  local mkey = ob_key(prefix, 'm:' .. id)
  local platform, err = ob_check(mkey, ARGV[i + 1])
  if err then
    out[#out + 1] = err
  else
    redis.call('ZREM', ob_key(prefix, 'due:' .. platform), id)
    redis.call('ZREM', ob_key(prefix, 'claimed:' .. platform), id)
    redis.call('ZREM', all, id)
    redis.call('DEL', mkey)
    out[#out + 1] = 'OK'
  end
end
return out
