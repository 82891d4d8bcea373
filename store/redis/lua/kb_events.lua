-- kb_events reads up to limit events of a board after a cursor, oldest
-- first: from the board's stream, or, for one card, the entries its
-- list of cursors names.
-- KEYS[1] the board's stream
-- KEYS[2] the card's cursors, or none
-- ARGV[1] the cursor to read after, '' from the start
-- ARGV[2] limit
-- Returns pairs: cursor, encoding.
local limit = small(ARGV[2])
local out = {}
local function add(entries)
  for _, e in ipairs(entries) do
    out[#out + 1] = e[1]
    out[#out + 1] = e[2][2]
  end
end
if not KEYS[2] then
  local from = '-'
  if ARGV[1] ~= '' then
    from = '(' .. ARGV[1]
  end
  add(redis.call('XRANGE', KEYS[1], from, '+', 'COUNT', limit))
  return out
end
-- A stream id is ms-seq: compare both parts as numbers.
local function after(a, b)
  local am, as = string.match(a, '^(%d+)-(%d+)$')
  local bm, bs = string.match(b, '^(%d+)-(%d+)$')
  am, as, bm, bs = tonumber(am), tonumber(as), tonumber(bm), tonumber(bs)
  return am > bm or (am == bm and as > bs)
end
for _, sid in ipairs(redis.call('LRANGE', KEYS[2], 0, -1)) do
  if #out >= 2 * limit then
    break
  end
  if ARGV[1] == '' or after(sid, ARGV[1]) then
    add(redis.call('XRANGE', KEYS[1], sid, sid))
  end
end
return out
