-- q_append adds an inbound to the end of its lane, unless its message id
-- was seen in this conversation within the dedupe window. Given a worker,
-- it also leases the conversation to it, as a claim would, when the new
-- entry is the conversation's only one and no lease is live: the process
-- that received the message runs it without a claim of its own.
-- KEYS[1] conversation state hash
-- KEYS[2] ready sorted set
-- KEYS[3] the inbound's lane stream
-- KEYS[4] conversation metadata hash
-- KEYS[5] conversation history list
-- KEYS[6] the conversations' activity index (sorted set)
-- KEYS[7] the conversation's index of session controllers' states
-- KEYS[8] dedupe key of the message id; absent when the inbound has none
-- ARGV[1] conversation tag
-- ARGV[2] lane, 0..5
-- ARGV[3] encoded inbound
-- ARGV[4] now in ms, or '' for the server's time
-- ARGV[5] dedupe window in ms
-- ARGV[6] worker to lease the conversation to, or '' to lease it to none
-- ARGV[7] lease ttl in ms of that lease
-- ARGV[8] the lease token at which the caller knows the history, or ''
-- ARGV[9] the length of the history the caller knows at that token
-- ARGV[10] key prefix
-- Returns {entry id, 1 if duplicate else 0, the metadata as a flat
-- field/value list (empty when duplicate, or when it leased the
-- conversation)}; then, when it queued the entry without leasing the
-- conversation, 1 if a live lease held it, else 0, and when the lease
-- has an entry handed out, that entry's id, data and the ms it was
-- handed out at (see running); or, when it leased the
-- conversation, then token,
-- expires ms, enqueued ms, and {encoded history message, …}, or 1 in
-- place of the history when it is the one the caller knows: the fence is
-- still the token it was known at, so no lease was granted since and only
-- that lease's holder appended to it, and its length (the state's hl) is
-- the same; then 1 when the conversation has a session controller's
-- state, else 0.
local now = now_ms(ARGV[4])
local lane = ARGV[2]
local count = 'n' .. lane
local v = redis.call('HMGET', KEYS[1], 'token', 'exp', 'seq', count, 'lanes', 'fence', 'hl')
local lanes = v[5] or ''

-- Ids are "<seq>-<lane>": a per-conversation sequence, so ids order the
-- entries of all lanes by arrival, and the lane, so an ack can find the
-- stream from the id alone.
local seq = int((tonumber(v[3]) or 0) + 1)
local id = seq .. '-' .. lane

if KEYS[8] then
  local first = remember_once(KEYS[8], id, now, ARGV[5])
  if first then
    -- A redelivered update is also a chance to repair an index that lost
    -- the conversation.
    if lanes ~= '' then
      index_new(KEYS[2], ARGV[1], v[1], v[2], now)
    end
    return {first, 1, {}}
  end
end

local was = small(v[4])
local n = int(was + 1)
local at = int(now)
-- A new entry is the conversation's activity.
redis.call('ZADD', KEYS[6], at, ARGV[1])
local held = live(v[1], v[2], now)
-- With no entry before this one (lanes counts the delivered-unacked entry
-- too) and no live lease, the new entry is what a claim would take next.
-- Delivered at once, it is kept in the state hash (pd, pat) rather than
-- its lane's stream: the finish that acks it clears two fields in the
-- HSET it makes anyway, instead of an XADD now and an XDEL then. Its lane
-- is listed in lanes, as a lane is when its count rises from zero (below);
-- the lanes written otherwise are those read.
if ARGV[6] ~= '' and lanes == '' and not held then
  local token = int((tonumber(v[6]) or 0) + 1)
  local exp = int(now + tonumber(ARGV[7]))
  redis.call('HSET', KEYS[1], 'seq', seq, count, n, 'lanes', was <= 0 and lane or '', 'fence', token,
    'worker', ARGV[6], 'token', token, 'exp', exp, 'pend', id, 'dlv', '1', 'pd', ARGV[3], 'pat', at, 'pst', at)
  -- Held, the conversation is indexed at its lease's expiry, as a claim
  -- indexes it.
  redis.call('ZADD', KEYS[2], exp, ARGV[1])
  -- hl is the history's length, as the writes under a lease (q_finish,
  -- q_history) and q_clear_history leave it; absent, as in a state of an
  -- earlier layout, the history is read.
  local ctl = redis.call('EXISTS', KEYS[7])
  if ARGV[8] ~= '' and v[6] == ARGV[8] and v[7] == ARGV[9] then
    return {id, 0, {}, token, exp, at, 1, ctl}
  end
  return {id, 0, {}, token, exp, at, redis.call('LRANGE', KEYS[5], '0', '-1'), ctl}
end
redis.call('XADD', KEYS[3], id, 'd', ARGV[3], 'at', at)
local listed = lanes
if was <= 0 and not has_lane(lanes, lane) then
  listed = lanes .. lane
end
redis.call('HSET', KEYS[1], 'seq', seq, count, n, 'lanes', listed)
if lanes == '' then
  index_new(KEYS[2], ARGV[1], v[1], v[2], now)
end
local meta = redis.call('HGETALL', KEYS[4])
if held then
  local rid, rdata, rsince = running(ARGV[10], ARGV[1], KEYS[1], now)
  if rid then
    return {id, 0, meta, 1, rid, rdata, rsince}
  end
  return {id, 0, meta, 1}
end
return {id, 0, meta, 0}
