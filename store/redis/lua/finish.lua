-- finish commits a turn: acks its entry, appends its history, enqueues its
-- outbox messages and optionally gives the lease back, all in one step and
-- only while the lease is current.
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
-- ARGV[8] h, the number of history messages
-- ARGV[9 .. 8+h] encoded history messages
-- ARGV[9+h] o, the number of outbox messages
-- then o groups of four: encoded message, platform, idempotency key or '',
--   next attempt in ms or ''
-- Returns {'LOST'}, {'NOTFOUND'} or {'OK'}.
local prefix, tag, state = ARGV[1], ARGV[2], KEYS[1]
if not lease_ok(state, ARGV[3]) then
  return {'LOST'}
end
local id = ARGV[4]
local lane = string.match(id, '^%d+%-(%d)$')
if not lane then
  return {'NOTFOUND'}
end
local key = lane_key(prefix, tag, lane)
-- XACK is the first write: when the entry is not pending nothing else has
-- been touched yet.
if redis.call('EXISTS', key) == 0 or redis.call('XACK', key, GROUP, id) == 0 then
  return {'NOTFOUND'}
end
redis.call('XDEL', key, id)
-- An emptied stream is deleted so idle conversations cost no memory; the
-- next append creates it again with its group.
if redis.call('XLEN', key) == 0 then
  redis.call('DEL', key)
end
if redis.call('HGET', state, 'pend') == id then
  redis.call('HDEL', state, 'pend')
end

local now = now_ms(ARGV[6])
local h = tonumber(ARGV[8])
if h > 0 then
  push_all(KEYS[4], 9, h)
end
local at = 9 + h
local o = tonumber(ARGV[at])
local window = tonumber(ARGV[7])
for i = 0, o - 1 do
  local b = at + 1 + i * 4
  ob_enqueue(prefix, ARGV[b], ARGV[b + 1], ARGV[b + 2], ARGV[b + 3], now, window)
end
if ARGV[5] == '1' then
  release(prefix, tag, state, KEYS[2], KEYS[3], now)
end
return {'OK'}
