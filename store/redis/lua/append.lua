-- append adds an inbound to the end of its lane, unless its message id was
-- seen in this conversation within the dedupe window.
-- KEYS[1] conversation state hash
-- KEYS[2] ready sorted set
-- KEYS[3] the inbound's lane stream
-- KEYS[4] conversation metadata hash
-- KEYS[5] dedupe key of the message id; absent when the inbound has none
-- ARGV[1] conversation tag
-- ARGV[2] lane, 0..5
-- ARGV[3] encoded inbound
-- ARGV[4] now in ms, or '' for the server's time
-- ARGV[5] dedupe window in ms
-- Returns {entry id, 1 if duplicate else 0, the metadata as a flat
-- field/value list (empty when duplicate)}.
local now = now_ms(ARGV[4])
local lane = ARGV[2]
local count = 'n' .. lane
local v = redis.call('HMGET', KEYS[1], 'token', 'exp', 'seq', count, 'lanes')
local lanes = v[5] or ''

-- Ids are "<seq>-<lane>": a per-conversation sequence, so ids order the
-- entries of all lanes by arrival, and the lane, so an ack can find the
-- stream from the id alone.
local seq = int((tonumber(v[3]) or 0) + 1)
local id = seq .. '-' .. lane

if KEYS[5] then
  local first = remember_once(KEYS[5], id, now, tonumber(ARGV[5]))
  if first then
    -- A redelivered update is also a chance to repair an index that lost
    -- the conversation.
    if lanes ~= '' then
      index_new(KEYS[2], ARGV[1], v[1], v[2], now)
    end
    return {first, 1, {}}
  end
end

local was = tonumber(v[4]) or 0
local fields = {'seq', seq, count, int(was + 1)}
if was <= 0 and not has_lane(lanes, lane) then
  fields[5] = 'lanes'
  fields[6] = lanes .. lane
end
redis.call('XADD', KEYS[3], id, 'd', ARGV[3], 'at', int(now))
redis.call('HSET', KEYS[1], unpack(fields))
if lanes == '' then
  index_new(KEYS[2], ARGV[1], v[1], v[2], now)
end
return {id, 0, redis.call('HGETALL', KEYS[4])}
