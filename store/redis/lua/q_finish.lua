-- q_finish commits a turn: acks its entry, removes the queued entries it
-- took in (absorbed), appends its history, enqueues its outbox messages and
-- optionally gives the lease back, all in one step and only while the lease
-- is current. Given a worker, it then claims the next ready conversation
-- for it in the same step, as q_claim would.
-- KEYS[1] conversation state hash
-- KEYS[2] ready sorted set
-- KEYS[3] history list
-- KEYS[4] metadata hash
-- KEYS[5] the conversations' activity index (sorted set)
-- ARGV[1] key prefix
-- ARGV[2] conversation tag
-- ARGV[3] lease token
-- ARGV[4] entry id to ack
-- ARGV[5] '1' to release the lease
-- ARGV[6] now in ms, or '' for the server's time
-- ARGV[7] dedupe window in ms, for outbox idempotency keys
-- ARGV[8] worker to claim the next conversation for, or '' to claim none
-- ARGV[9] lease ttl in ms of that claim
-- ARGV[10] a, the number of absorbed entries
-- ARGV[11 .. 10+a] absorbed entry ids, no repeats
-- ARGV[11+a] h, the number of history messages
-- ARGV[12+a .. 11+a+h] encoded history messages
-- ARGV[12+a+h] o, the number of outbox messages
-- then o groups of four: encoded message, target, idempotency key or '',
--   next attempt in ms or ''
-- then k, the number of metadata keys to write, and k pairs of key and
--   value ('' deletes the key)
-- then the delivery worker to enqueue the outbox messages claimed for, or
--   '' to enqueue them due, and the ttl in ms of that claim
-- then '1' to claim for the worker only when this conversation has entries
--   left, else '0'
-- then how many of the history's oldest messages to drop before the
--   history messages are appended
-- then w, the number of other domains' write commands (Finish.Writes, see
--   writes.go), and w groups: command, n, the index (1-based, 0 for none)
--   of the argument to replace with the time in ms, then n arguments, the
--   key first
-- then f, the number of forwarded writes' records (forward.go), and f
--   records, each added to the shard's forwarded writes (prefix .. 'fwd',
--   a sorted set) at the commit's time
-- then the score in ms of the conversation of another shard ready
--   longest, or '' when no other shard has one ready: a claim takes a
--   conversation of this shard only when it was ready before it or at
--   the same time; or '*' to claim none but answer 'ELSEWHERE' where it
--   would claim
-- Returns {'LOST'}, {'NOTFOUND'}, or {'OK', handed}, where handed is {}
-- unless a message was enqueued claimed, else {claim token, expires ms,
-- enqueued ms, then per outbox message its id and 1 when claimed, else
-- 0}; and when it claimed a conversation, then tag, token, expires ms,
-- entry id, entry data, enqueued ms, deliveries, {encoded history
-- message, …}, 1 when it has a session controller's state else 0; or,
-- when asked to claim and given another shard's conversation, having
-- claimed none because that one was ready longer or this shard has
-- none ready, or given '*', then 'ELSEWHERE': the claim is the
-- caller's to make.
local prefix, tag, state, ready = ARGV[1], ARGV[2], KEYS[1], KEYS[2]
local id = ARGV[4]
local lane, digit = lane_of(id)
local count = 'n' .. (digit or '0')
local v = redis.call('HMGET', state, 'token', 'pend', count, 'lanes', 'pat')
if v[1] ~= ARGV[3] then
  return {'LOST'}
end
-- Only the entry delivered to the holder can be acked, and the state hash
-- names it.
if not lane or id ~= v[2] then
  return {'NOTFOUND'}
end
local lanes = v[4] or ''
local left = small(v[3]) - 1
-- The HSET's fields: the trailing nils make room for those the common
-- path adds (kept entry, lanes, hl, release), so that adding them never
-- grows the table; # still counts the ones set, which come in order.
-- pst is cleared with pend, so that after a commit no time is left for a
-- grant that does not write it (an earlier version's, in a rolling
-- upgrade) to be told with. A lease that was released or ran out leaves
-- its pst, which such a grant then tells as its entry's
-- (docs/known-gaps.md).
local fields = {'pend', '', 'pst', '', count, int(left), nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil}
-- The entry is kept in the state hash when it was delivered as it was
-- appended (see q_append), else in its lane's stream.
local kept = v[5] and v[5] ~= ''
if kept then
  fields[7], fields[8], fields[9], fields[10] = 'pd', '', 'pat', ''
end
if left <= 0 then
  lanes = without_lane(lanes, digit)
end

-- Every absorbed entry must be queued: in its lane's stream and not the
-- delivered one. They are all looked up before the first write, so a
-- missing one leaves everything as it was. Their lanes' counts drop in
-- the same HSET as the acked entry's.
local a = small(ARGV[10])
local absorbed
if a > 0 then
  absorbed = {}
  -- Counts before (was[lane + 1]) and after (n[lane]) the finish.
  local was = redis.call('HMGET', state, 'n0', 'n1', 'n2', 'n3', 'n4', 'n5')
  local n = {}
  for l = 0, LANES - 1 do
    n[l] = tonumber(was[l + 1]) or 0
  end
  n[lane] = left
  for i = 11, 10 + a do
    local aid = ARGV[i]
    local alane = lane_of(aid)
    if not alane or aid == id or absorbed[aid] then
      return {'NOTFOUND'}
    end
    local akey = lane_key(prefix, tag, alane)
    local found = redis.pcall('XRANGE', akey, aid, aid)
    if type(found) ~= 'table' or found.err or not found[1] then
      return {'NOTFOUND'}
    end
    absorbed[aid] = akey
    n[alane] = n[alane] - 1
  end
  fields[6] = int(n[lane])
  for l = 0, LANES - 1 do
    if n[l] ~= (tonumber(was[l + 1]) or 0) then
      if l ~= lane then
        fields[#fields + 1] = 'n' .. l
        fields[#fields + 1] = int(n[l])
      end
      if n[l] <= 0 then
        lanes = without_lane(lanes, l)
      end
    end
  end
end
if lanes ~= v[4] then
  fields[#fields + 1] = 'lanes'
  fields[#fields + 1] = lanes
end
local work = lanes ~= ''

-- Where each part of the arguments starts.
local h = small(ARGV[11 + a])
local at = 12 + a + h
local o = small(ARGV[at])
local mk = at + 1 + o * 4
local k = small(ARGV[mk])
local hk = mk + 1 + 2 * k
-- The other domains' write commands (Finish.Writes) may only be those of
-- WRITE_OPS: all are checked before the first write, so a refused one
-- leaves everything as it was.
-- They run first, once the acked entry is known to be in its stream: a
-- command that fails (a herald fault) then stops the script before the
-- turn's own writes, which a retry finds untouched.
local nw = small(ARGV[hk + 4])
local now
if nw > 0 then
  local refused = check_write_ops(ARGV, hk + 4)
  if refused then
    return refused
  end
  if not kept and not redis.call('XRANGE', lane_key(prefix, tag, lane), id, id)[1] then
    return {'NOTFOUND'}
  end
  now = now_ms(ARGV[6])
  run_write_ops(ARGV, hk + 4, now)
end

-- Deleting the acked entry is the first write: when it is not in its
-- stream (deleted by hand) nothing else has been touched yet. The state's
-- pend is the only record of its delivery (see next_entry), so there is
-- nothing else to ack.
if not kept and redis.call('XDEL', lane_key(prefix, tag, lane), id) == 0 then
  return {'NOTFOUND'}
end
if absorbed then
  -- An absorbed entry was never delivered, so deleting it is all: the
  -- lane's next read starts at what is left.
  for aid, akey in pairs(absorbed) do
    redis.call('XDEL', akey, aid)
  end
end

-- The time is read at most once: the commit is the conversation's
-- activity.
local window = ARGV[7]
now = now or now_ms(ARGV[6])
redis.call('ZADD', KEYS[5], int(now), tag)

-- The oldest messages go first, so that the history's length (hl, which
-- the state keeps; see q_append) counts what is left and what is added.
local drop = small(ARGV[hk + 3])
if drop > 0 then
  redis.call('LTRIM', KEYS[3], drop, -1)
end
if h > 0 then
  fields[#fields + 1] = 'hl'
  fields[#fields + 1] = int(call_all('RPUSH', KEYS[3], ARGV, 12 + a, h))
elseif drop > 0 then
  fields[#fields + 1] = 'hl'
  fields[#fields + 1] = int(redis.call('LLEN', KEYS[3]))
end
-- Outbox messages enqueued claimed share one claim token, as the messages
-- of one ob_claim do: the first one's sequence number, negated, so it is
-- unique without a count of its own and never one ob_claim hands out.
local hold
-- The claim's token, expiry and time head the reply's handed list.
local handed = {0, 0, 0}
if o > 0 and ARGV[hk] ~= '' then
  hold = {ARGV[hk], nil, int(now + tonumber(ARGV[hk + 1]))}
end
for i = 0, o - 1 do
  local b = at + 1 + i * 4
  local oid, _, claimed = ob_enqueue(prefix, ARGV[b], ARGV[b + 1], ARGV[b + 2], ARGV[b + 3], now, window, hold)
  handed[#handed + 1] = oid
  handed[#handed + 1] = claimed and 1 or 0
end
if hold then
  handed[1], handed[2], handed[3] = hold[2] or 0, hold[3], now
else
  handed = {}
end
if k > 0 then
  local set, del = {}, {}
  for i = mk + 1, mk + 2 * k, 2 do
    if ARGV[i + 1] == '' then
      del[#del + 1] = ARGV[i]
    else
      set[#set + 1] = ARGV[i]
      set[#set + 1] = ARGV[i + 1]
    end
  end
  if #set > 0 then
    redis.call('HSET', KEYS[4], unpack(set))
  end
  if #del > 0 then
    redis.call('HDEL', KEYS[4], unpack(del))
  end
end

-- The ready index holds a conversation while it has work: released with
-- work left, it is ready again behind the ones waiting; held, it stays
-- indexed at its lease's expiry; with nothing left it leaves the index.
if ARGV[5] == '1' then
  fields[#fields + 1] = 'worker'
  fields[#fields + 1] = ''
  fields[#fields + 1] = 'token'
  fields[#fields + 1] = ''
  fields[#fields + 1] = 'exp'
  fields[#fields + 1] = ''
  redis.call('HSET', state, unpack(fields))
  if work then
    redis.call('ZADD', ready, int(now), tag)
  else
    redis.call('ZREM', ready, tag)
  end
else
  redis.call('HSET', state, unpack(fields))
  if not work then
    redis.call('ZREM', ready, tag)
  end
end

-- The writes whose home is another shard are recorded, for Finish to
-- run there right after and the sweep to run again if it did not.
local fw = hk + 5
for _ = 1, nw do
  fw = fw + 3 + small(ARGV[fw + 1])
end
local nf = small(ARGV[fw])
if nf > 0 then
  local at_ms = int(now)
  for i = fw + 1, fw + nf do
    redis.call('ZADD', prefix .. 'fwd', at_ms, ARGV[i])
  end
end

-- Asked to claim only when this conversation has entries left, a finish
-- that leaves it without any does not search the ready index.
if ARGV[8] == '' or (ARGV[hk + 2] == '1' and not work) then
  return {'OK', handed}
end
local bound = ARGV[fw + nf + 1]
if bound == '*' then
  return {'OK', handed, 'ELSEWHERE'}
end
if bound ~= '' then
  local head = redis.call('ZRANGE', ready, '0', '0', 'WITHSCORES')
  if not head[1] or tonumber(head[2]) > tonumber(bound) then
    return {'OK', handed, 'ELSEWHERE'}
  end
end
local ntag, token, exp, nid, data, enq, deliveries, hist, ctl =
  claim_next(prefix, ready, ARGV[8], tonumber(ARGV[9]), now)
if not ntag then
  if bound ~= '' then
    return {'OK', handed, 'ELSEWHERE'}
  end
  return {'OK', handed}
end
return {'OK', handed, ntag, token, exp, nid, data, enq, deliveries, hist, ctl}
