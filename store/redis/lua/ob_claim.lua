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
-- sooner than that; one that waits behind another worker's live claim
-- waits for that worker (ob:waits:<worker>), out of the due sets, until
-- the message before it is settled or taken. Each earlier message is read
-- once a call and target: the last one found held by this worker is
-- remembered. Due messages are read window after window until the claim
-- is full or none is left, so it never comes back empty while a due
-- message no live claim holds up is there; a waiting one is read once
-- while it waits. A claim costs the due messages it reads, those waiting
-- for its worker (at most max + 64) and one target index step per message
-- taken.
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
local workers, beats = ob_renew(prefix, worker, now)
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

-- Some due messages may wait behind an earlier one: a few more are read
-- each window, and windows are read until the claim is full or no due
-- message is left. One that waits behind another worker's live claim
-- leaves due:<platform> for ob:waits:<that worker> (and 'wf' names the
-- worker), so it is read once while it waits, not by every claim: a
-- backlog behind one claim hides no other target's messages.
local READ = max + 64
local mine_waits = ob_key(prefix, 'waits:' .. worker)
local cand, seen = {}, {}
-- per platform: its due and claimed keys, how many of its due messages
-- in range were read, how many of those left the range since (waiting
-- for a worker, or until later), and whether it may have more.
local plats = {}
local byname = {}
for i = 6, #ARGV do
  local pl = {due = ob_key(prefix, 'due:' .. ARGV[i]), claimed = ob_key(prefix, 'claimed:' .. ARGV[i]),
    read = 0, gone = 0, more = true}
  plats[#plats + 1] = pl
  byname[ARGV[i]] = pl
  local expired = redis.call('ZRANGEBYSCORE', pl.claimed, '-inf', now, 'LIMIT', 0, SWEEP)
  if #expired > 0 then
    call_all('ZREM', pl.claimed, expired, 1, #expired)
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
    call_all('ZADD', pl.due, back, 1, #back)
  end
end
-- A candidate is {due score, id, platform, read from its due window}.
local function add(score, id, pl, windowed)
  if not seen[id] then
    seen[id] = true
    cand[#cand + 1] = {score, id, pl, windowed}
  end
end
local function by_due(a, b)
  if a[1] ~= b[1] then
    return a[1] < b[1]
  end
  return a[2] < b[2]
end
-- The messages that wait for this worker: behind its own claims, they
-- may be its to take. One no longer waiting for it is dropped.
for _, id in ipairs(redis.call('ZRANGE', mine_waits, 0, READ - 1)) do
  local v = redis.call('HMGET', ob_key(prefix, 'm:' .. id), 'wf', 'p', 'next')
  if v[1] ~= worker then
    redis.call('ZREM', mine_waits, id)
  elseif byname[v[2]] and tonumber(v[3]) <= now then
    add(tonumber(v[3]), id, byname[v[2]], false)
  end
end
-- read_due reads the next window of each platform's due messages and
-- reports whether any may have more.
local function read_due()
  local more = false
  for _, pl in ipairs(plats) do
    if pl.more then
      local r = redis.call('ZRANGEBYSCORE', pl.due, '-inf', now, 'WITHSCORES', 'LIMIT', pl.read - pl.gone, READ)
      pl.read = pl.read + #r / 2
      for j = 1, #r, 2 do
        add(tonumber(r[j + 1]), r[j], pl, true)
      end
      pl.more = #r / 2 == READ
      more = more or pl.more
    end
  end
  table.sort(cand, by_due)
  return more
end

-- mine[target] is the id of a message to target held by this worker
-- under a live claim, every earlier one to target held too: waits reads
-- only the ids after it.
local mine = {}
-- waits reports whether message id of target must wait for an earlier
-- one, and until when that one is due ('' when it is held elsewhere or
-- due now), and the worker that holds it under a live claim, if one does.
local function waits(id, target)
  local tkey = ob_target_key(prefix, target)
  local n = ob_seq(id)
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
        return true, '', live and v[1] or nil
      end
      mine[target] = ob_seq(e)
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
-- after holds the messages that may go now that the one before them to
-- their target was taken, for the next pass.
local after = {}
-- follow looks at the message after id to target, which may go to this
-- worker now that it holds id: it is a candidate when due, and one that
-- waits for another worker waits for this one from now on, so that this
-- worker's later claims find it.
local function follow(id, target, pl)
  local nxt = redis.call('ZRANGEBYSCORE', ob_target_key(prefix, target), '(' .. ob_seq(id), '+inf', 'LIMIT', 0, 1)[1]
  if not nxt or seen[nxt] then
    return
  end
  local v = redis.call('HMGET', ob_key(prefix, 'm:' .. nxt), 'exp', 'wf', 'next')
  if (tonumber(v[1]) or 0) > now or not v[3] then
    return
  end
  if v[2] then
    if v[2] ~= worker then
      ob_wait_for(prefix, nxt, worker)
    end
  elseif not redis.call('ZSCORE', pl.due, nxt) then
    -- Not due: handed, or claimed and not swept back yet.
    return
  end
  if tonumber(v[3]) <= now then
    seen[nxt] = true
    after[#after + 1] = {tonumber(v[3]), nxt, pl, false}
  end
end
-- take claims cand[i] when nothing earlier to its target waits, and
-- reports whether it did.
local function take(c)
  local id, pl = c[2], c[3]
  local due, claimed = pl.due, pl.claimed
  local mkey = ob_key(prefix, 'm:' .. id)
  local v = redis.call('HMGET', mkey, 'd', 'n', 'next', 'at', 'e', 'pg', 't', 'w')
  if v[1] and v[7] then
    local wait, until_at, holder = waits(id, v[7])
    if wait then
      if until_at ~= '' then
        ob_unwait(prefix, id)
        redis.call('HSET', mkey, 'next', until_at)
        redis.call('ZADD', due, until_at, id)
        if c[4] then
          pl.gone = pl.gone + 1
          c[4] = false
        end
      elseif holder then
        if ob_wait_for(prefix, id, holder) and c[4] then
          redis.call('ZREM', due, id)
          pl.gone = pl.gone + 1
          c[4] = false
        end
      end
      return false
    end
  end
  if v[7] and ob_seq(id) > (mine[v[7]] or 0) then
    mine[v[7]] = ob_seq(id)
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
    ob_unwait(prefix, id)
    redis.call('HSET', mkey, 'tok', token, 'exp', sexp, 'w', worker)
    m.into[#m.into + 1] = sexp
    m.into[#m.into + 1] = id
    -- A worker still named is one whose claim ended unsettled.
    local resend = v[8] and '1' or '0'
    for _, x in ipairs({id, v[1], v[2], v[3], v[4], v[5] or '', v[6] or '', resend}) do
      out[#out + 1] = x
    end
    if v[7] then
      follow(id, v[7], pl)
    end
  end
  return true
end
-- passes takes the candidates, oldest due first; a message that waits
-- behind one this claim takes goes in the next pass, after it.
local function passes()
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
    for _, c in ipairs(after) do
      left[#left + 1] = c
    end
    after = {}
    table.sort(left, by_due)
    cand = left
  end
end
local more = read_due()
passes()
while more and taken < max do
  more = read_due()
  passes()
end
if taken == 0 then
  return {}
end
for _, due in ipairs(order) do
  local m = moves[due]
  call_all('ZREM', due, m.out, 1, #m.out)
  call_all('ZADD', m.claimed, m.into, 1, #m.into)
end
return out
