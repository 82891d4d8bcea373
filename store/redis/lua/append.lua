-- append adds an inbound to the end of its lane, unless its message id was
-- seen in this conversation within the dedupe window.
-- KEYS[1] conversation state hash
-- KEYS[2] ready sorted set
-- KEYS[3] the inbound's lane stream
-- KEYS[4] dedupe key of the message id; absent when the inbound has none
-- ARGV[1] key prefix
-- ARGV[2] conversation tag
-- ARGV[3] lane, 0..5
-- ARGV[4] encoded inbound
-- ARGV[5] now in ms, or '' for the server's time
-- ARGV[6] dedupe window in ms
-- Returns {entry id, 1 if duplicate else 0}.
local now = now_ms(ARGV[5])

local function make_ready()
  if not leased(KEYS[1], now) then
    redis.call('ZADD', KEYS[2], 'NX', now, ARGV[2])
  end
end

if KEYS[4] then
  local first = seen(KEYS[4], now)
  if first then
    -- A redelivered update is also a chance to repair an index that lost
    -- the conversation: an unleased conversation with work must be ready.
    if has_work(ARGV[1], ARGV[2]) then
      make_ready()
    end
    return {first, 1}
  end
end

if redis.call('EXISTS', KEYS[3]) == 0 then
  redis.call('XGROUP', 'CREATE', KEYS[3], GROUP, '0', 'MKSTREAM')
end
-- Ids come from a per-conversation sequence, not the server's time, so
-- they keep increasing after an emptied stream is deleted; the lane rides
-- in the sequence part of the stream id so an ack can find the stream.
local seq = redis.call('HINCRBY', KEYS[1], 'seq', 1)
local id = int(seq) .. '-' .. ARGV[3]
redis.call('XADD', KEYS[3], id, 'd', ARGV[4], 'at', int(now))
if KEYS[4] then
  remember(KEYS[4], id, now, tonumber(ARGV[6]))
end
make_ready()
return {id, 0}
