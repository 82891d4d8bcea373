-- ob_claim holds up to max due messages of the given platforms, oldest due
-- first. The claimer's own heartbeat (ob:workers) is renewed by its ttl
-- (ob:beats), as ob_beat does: it is alive. The claims of other workers
-- whose heartbeat ran out end first, on every platform claimed for
-- (ob:platforms) and handed, the platforms' claims that expired are made
-- due again (bounded per platform and call), and so are handed messages
-- whose claims expired, of any platform (bounded per call). Only the named platforms'
-- sets are read, so messages for a platform with no adapter stay where
-- they are and spend no attempt, and expired claims of other platforms,
-- however many, are never in the way.
--
-- A message is taken only while every earlier message to its target
-- (ob:t:<target>) is held by this worker, claimed before or by this call,
-- so a target's messages leave in the order they were enqueued; one that
-- waits behind an earlier message given back until later is due no
-- sooner than that. Each earlier message is read once a call and target:
-- the last one found held by this worker is remembered.
-- KEYS: none; keys derive from the prefix (see doc.go).
-- ARGV[1] key prefix
-- ARGV[2] worker name
-- ARGV[3] max messages
-- ARGV[4] claim ttl in ms
-- ARGV[5] now in ms, or '' for the server's time
-- ARGV[6 ..] platforms, without repeats
-- Returns {} or {token, expires ms, then per message: id, encoded message,
-- attempts, next attempt ms, created ms, last error, parts, and '1' when
-- its earlier claim ended with nothing written (a resend), else '0'}.
local prefix, worker = ARGV[1], ARGV[2]
local max = tonumber(ARGV[3])
local now = now_ms(ARGV[5])
local SWEEP = math.max(256, max)
local handed = ob_key(prefix, 'handed')

-- The claiming worker is not dead, whatever its heartbeat said (it was
-- paused): its claim renews its heartbeat, so that another worker's
-- claim does not end the claims it takes now.
local workers = ob_key(prefix, 'workers')
local beats = ob_key(prefix, 'beats')
local beat = tonumber(redis.call('HGET', beats, worker))
if beat and beat > 0 then
  local until_at = tonumber(redis.call('ZSCORE', workers, worker))
  if until_at and until_at < now + beat then
    redis.call('ZADD', workers, now + beat, worker)
  end
end
-- The platforms claimed for, so that a dead worker's claims are found
-- whichever platforms it claimed for.
local platforms = ob_key(prefix, 'platforms')
call_all('SADD', platforms, ARGV, 6, #ARGV - 5)

-- A worker whose heartbeat ran out is gone: its live claims, handed or
-- not, of every platform, end now, and the sweeps make them due.
local gone = redis.call('ZRANGEBYSCORE', workers, '-inf', now, 'LIMIT', 0, 16)
for i = #gone, 1, -1 do
  if gone[i] == worker then
    table.remove(gone, i)
  end
end
if #gone > 0 then
  local dead = {}
  for _, w in ipairs(gone) do
    dead[w] = true
  end
  local held = {handed}
  for _, p in ipairs(redis.call('SMEMBERS', platforms)) do
    held[#held + 1] = ob_key(prefix, 'claimed:' .. p)
  end
  for _, key in ipairs(held) do
    local ids = redis.call('ZRANGEBYSCORE', key, '(' .. now, '+inf')
    local ended = {}
    for _, id in ipairs(ids) do
      local mkey = ob_key(prefix, 'm:' .. id)
      if dead[redis.call('HGET', mkey, 'w')] then
        redis.call('HSET', mkey, 'exp', int(now))
        ended[#ended + 1] = now
        ended[#ended + 1] = id
      end
    end
    call_all('ZADD', key, ended, 1, #ended)
  end
  call_all('ZREM', workers, gone, 1, #gone)
  call_all('HDEL', beats, gone, 1, #gone)
end

-- Handed messages whose claims ran out, of every platform, are due again
-- first (see ob_enqueue), so the platforms' due sets below have them.
local lapsed = redis.call('ZRANGEBYSCORE', handed, '-inf', now, 'LIMIT', 0, SWEEP)
if #lapsed > 0 then
  call_all('ZREM', handed, lapsed, 1, #lapsed)
  ob_undue(prefix, lapsed)
end

-- Some due messages may wait behind an earlier one: a few more are read.
local READ = max + 64
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
  local r = redis.call('ZRANGEBYSCORE', due, '-inf', now, 'WITHSCORES', 'LIMIT', 0, READ)
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

-- mine[target] is the id of a message to target held by this worker
-- under a live claim, every earlier one to target held too: waits reads
-- only the ids after it.
local mine = {}
-- waits reports whether message id of target must wait for an earlier
-- one, and until when that one is due ('' when it is held elsewhere or
-- due now).
local function waits(id, target)
  local tkey = ob_target_key(prefix, target)
  local n = tonumber(id)
  while true do
    local from = mine[target] and '(' .. mine[target] or '-inf'
    local earlier = redis.call('ZRANGEBYSCORE', tkey, from, '(' .. n, 'LIMIT', 0, 64)
    for _, e in ipairs(earlier) do
      local v = redis.call('HMGET', ob_key(prefix, 'm:' .. e), 'w', 'exp', 'next', 'p')
      local live = (tonumber(v[2]) or 0) > now
      if not v[4] or (not live and redis.call('ZSCORE', ob_key(prefix, 'dead'), e)) then
        -- Delivered or dead-lettered by a version that kept no target
        -- index: it holds nothing up.
        redis.call('ZREM', tkey, e)
      elseif not (live and v[1] == worker) then
        if not live and (tonumber(v[3]) or 0) > now then
          return true, v[3]
        end
        return true, ''
      end
      mine[target] = tonumber(e)
    end
    if #earlier < 64 then
      return false
    end
  end
end

local token = redis.call('INCR', ob_key(prefix, 'tok'))
local exp = now + tonumber(ARGV[4])
local sexp = int(exp)
local out = {token, exp}
-- The index moves go one command per index for all its messages (taken
-- out of due; those still stored into claimed), rather than one each.
local moves, order = {}, {}
local taken = 0
-- take claims cand[i] when nothing earlier to its target waits, and
-- reports whether it did.
local function take(c)
  local id, due, claimed = c[2], c[3], c[4]
  local mkey = ob_key(prefix, 'm:' .. id)
  local v = redis.call('HMGET', mkey, 'd', 'n', 'next', 'at', 'e', 'pg', 't', 'w')
  if v[1] and v[7] then
    local wait, until_at = waits(id, v[7])
    if wait then
      if until_at ~= '' then
        redis.call('HSET', mkey, 'next', until_at)
        redis.call('ZADD', due, until_at, id)
      end
      return false
    end
  end
  if v[7] and tonumber(id) > (mine[v[7]] or 0) then
    mine[v[7]] = tonumber(id)
  end
  taken = taken + 1
  local m = moves[due]
  if not m then
    m = {claimed = claimed, out = {}, into = {}}
    moves[due] = m
    order[#order + 1] = due
  end
  m.out[#m.out + 1] = id
  if v[1] then
    redis.call('HSET', mkey, 'tok', token, 'exp', sexp, 'w', worker)
    m.into[#m.into + 1] = sexp
    m.into[#m.into + 1] = id
    -- A worker still named is one whose claim ended unsettled.
    local resend = v[8] and '1' or '0'
    for _, x in ipairs({id, v[1], v[2], v[3], v[4], v[5] or '', v[6] or '', resend}) do
      out[#out + 1] = x
    end
  end
  return true
end
-- A message that waits behind one this claim takes goes in the next
-- pass, after it.
local progress = true
while progress and taken < max do
  progress = false
  local left = {}
  for _, c in ipairs(cand) do
    if taken < max and take(c) then
      progress = true
    else
      left[#left + 1] = c
    end
  end
  cand = left
end
for _, due in ipairs(order) do
  local m = moves[due]
  call_all('ZREM', due, m.out, 1, #m.out)
  call_all('ZADD', m.claimed, m.into, 1, #m.into)
end
return out
