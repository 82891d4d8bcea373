-- conv_list reads conversations' summaries: a page of the activity index,
-- the one active last first, or one conversation.
-- KEYS[1] the conversations' activity index (sorted set: tag → ms)
-- ARGV[1] key prefix
-- ARGV[2] limit, 1 or more
-- ARGV[3] now in ms, or '' for the server's time
-- ARGV[4] the cursor's activity in ms, or '' to start with the newest
-- ARGV[5] the cursor's tag: the page goes on after it (same activity and
--   a lower tag, then earlier activity)
-- ARGV[6] a tag to read alone, or '' for a page
-- Returns groups of six per conversation: tag, activity ms, queued entries
-- (the lane counts), lease holder and expiry ms ('' and 0 when no live
-- lease holds it), {metadata as a flat field/value list}.
-- below reports whether a sorts before b byte by byte, as a sorted set
-- orders members of one score (Lua's < follows the server's locale).
local function below(a, b)
  for i = 1, math.min(#a, #b) do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then
      return x < y
    end
  end
  return #a < #b
end

local prefix, limit = ARGV[1], tonumber(ARGV[2])
local now = now_ms(ARGV[3])
local page = {}
if ARGV[6] ~= '' then
  local at = redis.call('ZSCORE', KEYS[1], ARGV[6])
  if at then
    page = {ARGV[6], at}
  end
elseif ARGV[4] == '' then
  page = redis.call('ZRANGE', KEYS[1], '+inf', '-inf', 'BYSCORE', 'REV', 'LIMIT', 0, limit, 'WITHSCORES')
else
  -- Those active at the cursor's instant, highest tag first, come after
  -- it when their tag is lower; then the earlier ones.
  local ties = redis.call('ZRANGE', KEYS[1], ARGV[4], ARGV[4], 'BYSCORE', 'REV', 'WITHSCORES')
  for i = 1, #ties, 2 do
    if #page >= 2 * limit then
      break
    end
    if below(ties[i], ARGV[5]) then
      page[#page + 1] = ties[i]
      page[#page + 1] = ties[i + 1]
    end
  end
  local left = limit - #page / 2
  if left > 0 then
    local rest = redis.call('ZRANGE', KEYS[1], '(' .. ARGV[4], '-inf', 'BYSCORE', 'REV', 'LIMIT', 0, left, 'WITHSCORES')
    for i = 1, #rest do
      page[#page + 1] = rest[i]
    end
  end
end
local out = {}
for i = 1, #page, 2 do
  local tag = page[i]
  local v = redis.call('HMGET', conv_key(prefix, tag, 'state'), 'n0', 'n1', 'n2', 'n3', 'n4', 'n5', 'worker', 'token', 'exp')
  local queued = 0
  for lane = 1, LANES do
    queued = queued + small(v[lane])
  end
  local worker, exp = '', 0
  if live(v[8], v[9], now) then
    worker, exp = v[7] or '', int(tonumber(v[9]))
  end
  out[#out + 1] = tag
  out[#out + 1] = page[i + 1]
  out[#out + 1] = int(queued)
  out[#out + 1] = worker
  out[#out + 1] = exp
  out[#out + 1] = redis.call('HGETALL', conv_key(prefix, tag, 'meta'))
end
return out
