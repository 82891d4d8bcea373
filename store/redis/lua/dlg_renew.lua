-- dlg_renew extends the claims that are still current (the child is
-- running under the same token) to ttl from now, recording progress
-- where it is given, and moves them in the running set.
-- KEYS: none; keys derive from the prefix (see delegation.go).
-- ARGV[1] key prefix
-- ARGV[2] claim ttl in ms
-- ARGV[3] now in ms, or '' for the server's time
-- ARGV[4 ..] triples: child id, claim token, encoded progress or '' to
--   keep the one recorded
-- Returns {expires ms, then per triple 1 when renewed, else 0}.
local prefix = ARGV[1]
local now = now_ms(ARGV[3])
local exp = int(now + tonumber(ARGV[2]))
local running = dlg_key(prefix, 'running')
local out = {exp}
for i = 4, #ARGV, 3 do
  local id = ARGV[i]
  local ckey = dlg_key(prefix, 'c:' .. id)
  local v = redis.call('HMGET', ckey, 's', 'tok')
  if v[1] == 'running' and v[2] == ARGV[i + 1] then
    if ARGV[i + 2] ~= '' then
      redis.call('HSET', ckey, 'exp', exp, 'p', ARGV[i + 2])
    else
      redis.call('HSET', ckey, 'exp', exp)
    end
    redis.call('ZADD', running, exp, id)
    out[#out + 1] = 1
  else
    out[#out + 1] = 0
  end
end
return out
