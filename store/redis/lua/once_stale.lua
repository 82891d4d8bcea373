-- once_stale lists up to limit fires whose identity starts with prefix,
-- not done, whose claim ran out by the store's clock, soonest expired
-- first. It reads only the expired part of the index of the fires not
-- done (fires whose holder died), a chunk at a time, until it has limit
-- of them or none is left.
-- KEYS[1] the index of the fires not done, scored by claim expiry (ms)
-- ARGV[1] the prefix
-- ARGV[2] limit
-- ARGV[3] now in ms, or '' for the server's time
-- Returns, per fire: its id and its claim's expiry (ms).
local STALE_CHUNK = 256
local prefix, n = ARGV[1], tonumber(ARGV[2])
local now = int(now_ms(ARGV[3]))
local out = {}
local from = 0
while #out < 2 * n do
  local got = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'WITHSCORES', 'LIMIT', int(from), int(STALE_CHUNK))
  for i = 1, #got, 2 do
    local id = got[i]
    if #out < 2 * n and string.sub(id, 1, #prefix) == prefix then
      out[#out + 1] = id
      out[#out + 1] = got[i + 1]
    end
  end
  if #got < 2 * STALE_CHUNK then
    break
  end
  from = from + STALE_CHUNK
end
return out
