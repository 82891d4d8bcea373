-- once_stale lists up to limit fires whose identity starts with prefix,
-- not done, whose claim ran out by the store's clock, soonest expired
-- first. It reads only the expired part of the index of the fires not
-- done (fires whose holder died), a chunk at a time, until it has limit
-- of them or none is left.
-- KEYS[1] the index of the fires not done, scored by claim expiry (ms)
-- ARGV[1] the prefix
-- ARGV[2] limit
-- ARGV[3] now in ms, or '' for the server's time
-- Returns the fire ids.
local STALE_CHUNK = 256
local prefix, n = ARGV[1], tonumber(ARGV[2])
local now = int(now_ms(ARGV[3]))
local out = {}
local from = 0
while #out < n do
  local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', int(from), int(STALE_CHUNK))
  for _, id in ipairs(ids) do
    if #out < n and string.sub(id, 1, #prefix) == prefix then
      out[#out + 1] = id
    end
  end
  if #ids < STALE_CHUNK then
    break
  end
  from = from + STALE_CHUNK
end
return out
