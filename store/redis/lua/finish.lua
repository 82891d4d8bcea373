-- finish commits a turn: acks its entry, removes the queued entries it
-- took in (absorbed), appends its history, enqueues its outbox messages and
-- optionally gives the lease back, all in one step and only while the lease
-- is current.
-- KEYS[1] conversation state hash
-- KEYS[2] ready sorted set
-- KEYS[3] leases sorted set
-- KEYS[4] history list
-- ARGV[1] key prefix
-- ARGV[2] conversation tag
-- ARGV[3] lease token
-- ARGV[4] entry id to ack
-- ARGV[5] '1' to release the lease
-- ARGV[6] now in ms, or '' for the server's time
-- ARGV[7] dedupe window in ms, for outbox idempotency keys
-- ARGV[8] a, the number of absorbed entries
-- ARGV[9 .. 8+a] absorbed entry ids, no repeats
-- ARGV[9+a] h, the number of history messages
-- ARGV[10+a .. 9+a+h] encoded history messages
-- ARGV[10+a+h] o, the number of outbox messages
-- then o groups of four: encoded message, platform, idempotency key or '',
--   next attempt in ms or ''
-- Returns {'LOST'}, {'NOTFOUND'} or {'OK'}.
local prefix, tag, state = ARGV[1], ARGV[2], KEYS[1]
local st = load_state(state)
if st.token ~= ARGV[3] then
  return {'LOST'}
end
local id = ARGV[4]
local lane = lane_of(id)
if not lane or st.n[lane] == 0 then
  return {'NOTFOUND'}
end
local key = lane_key(prefix, tag, lane)

-- Every absorbed entry must be queued: in its lane's stream and not the
-- delivered one. They are all looked up before the first write, so a
-- missing one leaves everything as it was.
local n = {}
for l = 0, LANES - 1 do
  n[l] = st.n[l]
end
n[lane] = n[lane] - 1
local a = tonumber(ARGV[8])
local absorbed = {}
for i = 9, 8 + a do
  local aid = ARGV[i]
  local alane = lane_of(aid)
  if not alane or aid == id or aid == st.pend or absorbed[aid] then
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

-- XACK is the first write: when the entry is not pending nothing else has
-- been touched yet.
if redis.call('XACK', key, GROUP, id) == 0 then
  return {'NOTFOUND'}
end
-- Acked entries are deleted so they do not accumulate; the emptied
-- stream itself stays with its group, ready for the next append.
redis.call('XDEL', key, id)
-- An absorbed entry was never delivered, so it is only deleted: the group
-- skips deleted entries when it reads on.
local counts = {'n' .. lane, n[lane]}
for aid, akey in pairs(absorbed) do
  redis.call('XDEL', akey, aid)
end
for l = 0, LANES - 1 do
  if l ~= lane and n[l] ~= st.n[l] then
    counts[#counts + 1] = 'n' .. l
    counts[#counts + 1] = n[l]
  end
end
local work = st.work - 1 - a

-- The time is needed only to enqueue outbox messages or to make the
-- conversation ready again; most turns read it once or not at all.
local now_cache
local function now()
  if not now_cache then
    now_cache = now_ms(ARGV[6])
  end
  return now_cache
end
local h = tonumber(ARGV[9 + a])
if h > 0 then
  push_all(KEYS[4], 10 + a, h)
end
local at = 10 + a + h
local o = tonumber(ARGV[at])
local window = tonumber(ARGV[7])
for i = 0, o - 1 do
  local b = at + 1 + i * 4
  ob_enqueue(prefix, ARGV[b], ARGV[b + 1], ARGV[b + 2], ARGV[b + 3], now(), window)
end

local pend = st.pend
if pend == id then
  pend = ''
end
counts[#counts + 1] = 'pend'
counts[#counts + 1] = pend or ''
if ARGV[5] == '1' then
  release(tag, state, KEYS[2], KEYS[3], now, work, unpack(counts))
else
  redis.call('HSET', state, unpack(counts))
  -- A held conversation with nothing left need not be watched for expiry:
  -- with no work there is nothing to hand to another worker. An append
  -- puts it back in the leases set.
  if work == 0 then
    redis.call('ZREM', KEYS[3], tag)
  end
end
return {'OK'}
