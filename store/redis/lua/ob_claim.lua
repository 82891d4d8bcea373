-- ob_claim holds up to max due messages of the given platforms, oldest due
-- first. Claims that expired are made due again first (bounded per call).
-- Only the due sets of the named platforms are read, so messages for a
-- platform with no adapter stay where they are and spend no attempt.
-- KEYS: none; keys derive from the prefix (see doc.go).
-- ARGV[1] key prefix
-- ARGV[2] worker name
-- ARGV[3] max messages
-- ARGV[4] claim ttl in ms
-- ARGV[5] now in ms, or '' for the server's time
-- ARGV[6 ..] platforms, without repeats
-- Returns {} or {token, expires ms, then per message: id, encoded message,
-- attempts, next attempt ms, created ms, last error}.
local prefix = ARGV[1]
local max = tonumber(ARGV[3])
local now = now_ms(ARGV[5])
local claimed = ob_key(prefix, 'claimed')
local SWEEP = 256

local expired = redis.call('ZRANGEBYSCORE', claimed, '-inf', now, 'LIMIT', 0, SWEEP)
for _, id in ipairs(expired) do
  redis.call('ZREM', claimed, id)
  local v = redis.call('HMGET', ob_key(prefix, 'm:' .. id), 'p', 'next')
  if v[1] then
    -- It keeps its claim token until someone claims it again, so a slow
    -- sender that got through can still ack.
    redis.call('ZADD', ob_key(prefix, 'due:' .. v[1]), tonumber(v[2]), id)
  end
end

local cand = {}
for i = 6, #ARGV do
  local due = ob_key(prefix, 'due:' .. ARGV[i])
  local r = redis.call('ZRANGEBYSCORE', due, '-inf', now, 'WITHSCORES', 'LIMIT', 0, max)
  for j = 1, #r, 2 do
    cand[#cand + 1] = {tonumber(r[j + 1]), r[j], due}
  end
end
if #cand == 0 then
  return {}
end
table.sort(cand, function(a, b)
  if a[1] ~= b[1] then
    return a[1] < b[1]
  end
  return a[2] < b[2]
end)

local token = redis.call('INCR', ob_key(prefix, 'tok'))
local exp = now + tonumber(ARGV[4])
local out = {token, exp}
for i = 1, math.min(max, #cand) do
  local id, due = cand[i][2], cand[i][3]
  local mkey = ob_key(prefix, 'm:' .. id)
  redis.call('ZREM', due, id)
  local v = redis.call('HMGET', mkey, 'd', 'n', 'next', 'at', 'e')
  if v[1] then
    redis.call('HSET', mkey, 'tok', token, 'exp', int(exp), 'w', ARGV[2])
    redis.call('ZADD', claimed, exp, id)
    for _, x in ipairs({id, v[1], v[2], v[3], v[4], v[5] or ''}) do
      out[#out + 1] = x
    end
  end
end
return out
