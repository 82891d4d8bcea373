-- append adds an inbound to the end of its lane, unless its message id was
-- seen in this conversation within the dedupe window.
-- KEYS[1] conversation state hash
-- KEYS[2] ready sorted set
-- KEYS[3] leases sorted set
-- KEYS[4] the inbound's lane stream
-- KEYS[5] dedupe key of the message id; absent when the inbound has none
-- ARGV[1] key prefix
-- ARGV[2] conversation tag
-- ARGV[3] lane, 0..5
-- ARGV[4] encoded inbound
-- ARGV[5] now in ms, or '' for the server's time
-- ARGV[6] dedupe window in ms
-- Returns {entry id, 1 if duplicate else 0}.
local now = now_ms(ARGV[5])
local st = load_state(KEYS[1])

-- index puts a conversation with work where a Claim finds it: in ready
-- when nobody holds it, else in leases, which gives it back to ready when
-- the holder dies.
local function index()
  if leased(st, now) then
    redis.call('ZADD', KEYS[3], st.exp, ARGV[2])
  else
    redis.call('ZADD', KEYS[2], 'NX', now, ARGV[2])
  end
end

local lane = tonumber(ARGV[3])
-- Ids are "<seq>-<lane>": a per-conversation sequence, so ids order the
-- entries of all lanes by arrival, and the lane, so an ack can find the
-- stream from the id alone.
local seq = st.seq + 1
local id = int(seq) .. '-' .. ARGV[3]

if KEYS[5] then
  local first = remember_once(KEYS[5], id, now, tonumber(ARGV[6]))
  if first then
    -- A redelivered update is also a chance to repair an index that lost
    -- the conversation.
    if st.work > 0 then
      index()
    end
    return {first, 1}
  end
end

local groups = st.groups
if not string.find(groups, ARGV[3], 1, true) then
  -- pcall: the group may exist already if the state hash was lost.
  redis.pcall('XGROUP', 'CREATE', KEYS[4], GROUP, '0', 'MKSTREAM')
  groups = groups .. ARGV[3]
end
redis.call('XADD', KEYS[4], id, 'd', ARGV[4], 'at', int(now))
redis.call('HSET', KEYS[1], 'seq', int(seq), 'n' .. ARGV[3], st.n[lane] + 1, 'groups', groups)
st.work = st.work + 1
index()
return {id, 0}
