-- ob_claim holds up to max due messages of the given platforms, oldest due
-- first. The platforms' claims that expired are made due again first
-- (bounded per platform and call), and so are handed messages whose
-- claims expired, of any platform (bounded per call). Only the named
-- platforms' sets are read, so messages for a platform with no adapter
-- stay where they are and spend no attempt, and expired claims of other
-- platforms, however many, are never in the way.
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
local SWEEP = math.max(256, max)

-- Handed messages whose claims ran out, of every platform, are due again
-- first (see ob_enqueue), so the platforms' due sets below have them.
local handed = ob_key(prefix, 'handed')
local lapsed = redis.call('ZRANGEBYSCORE', handed, '-inf', now, 'LIMIT', 0, SWEEP)
if #lapsed > 0 then
  call_all('ZREM', handed, lapsed, 1, #lapsed)
  ob_undue(prefix, lapsed)
end

local cand = {}
for i = 6, #ARGV do
  local due = ob_key(prefix, 'due:' .. ARGV[i])
  local claimed = ob_key(prefix, 'claimed:' .. ARGV[i])
  local expired = redis.call('ZRANGEBYSCORE', claimed, '-inf', now, 'LIMIT', 0, SWEEP)
  if #expired > 0 then
    call_all('ZREM', claimed, expired, 1, #expired)
    local back = {}
    for _, id in ipairs(expired) do
      local next_at = redis.call('HGET', ob_key(prefix, 'm:' .. id), 'next')
      if next_at then
        -- Due again at its old time, so it keeps its place among the due.
        -- It keeps its claim token until someone claims it again, so a
        -- slow sender that got through can still ack.
        back[#back + 1] = next_at
        back[#back + 1] = id
      end
    end
    call_all('ZADD', due, back, 1, #back)
  end
  local r = redis.call('ZRANGEBYSCORE', due, '-inf', now, 'WITHSCORES', 'LIMIT', 0, max)
  for j = 1, #r, 2 do
    cand[#cand + 1] = {tonumber(r[j + 1]), r[j], due, claimed}
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
local sexp = int(exp)
local out = {token, exp}
-- The index moves go one command per index for all its messages (taken
-- out of due; those still stored into claimed), rather than one each.
local moves, order = {}, {}
for i = 1, math.min(max, #cand) do
  local id, due, claimed = cand[i][2], cand[i][3], cand[i][4]
  local m = moves[due]
  if not m then
    m = {claimed = claimed, out = {}, into = {}}
    moves[due] = m
    order[#order + 1] = due
  end
  m.out[#m.out + 1] = id
  local mkey = ob_key(prefix, 'm:' .. id)
  local v = redis.call('HMGET', mkey, 'd', 'n', 'next', 'at', 'e')
  if v[1] then
    redis.call('HSET', mkey, 'tok', token, 'exp', sexp, 'w', ARGV[2])
    m.into[#m.into + 1] = sexp
    m.into[#m.into + 1] = id
    for _, x in ipairs({id, v[1], v[2], v[3], v[4], v[5] or ''}) do
      out[#out + 1] = x
    end
  end
end
for _, due in ipairs(order) do
  local m = moves[due]
  call_all('ZREM', due, m.out, 1, #m.out)
  call_all('ZADD', m.claimed, m.into, 1, #m.into)
end
return out
