-- kb_apply applies one kanban change whole (kanban.Store.Apply), or
-- nothing when a card it read moved on: it checks everything first and
-- writes only then.
-- ARGV[1] key prefix
-- ARGV[2] '1': stamp the change with the server's TIME (kanban.Change.Stamp):
--   its encodings' instants are given as format items (kb_stamp), its
--   runs' start ms are offsets
-- ARGV[3 ..] sections, each its count then its items:
--   cards: id, board, status, idempotency key, version read (0: new),
--     encoding, marks
--   checks: id, version
--   links, unlinks: parent, child
--   comments: card, encoding, marks
--   attachments: card, name, encoding, marks
--   runs: id, card, start ms, encoding, marks
--   events: board, card, encoding, marks
--   instants: offset seconds, offset nanoseconds (the change's instants
--     to stamp, each once; none unless stamping), last: the store knows
--     them once it has made every encoding
-- An encoding's marks are '' (it is stored as given), or one byte an
-- instant of it, the instant's place in the instants section: the
-- encoding is then a string.format text whose %s items are those
-- instants, in order, and whose other % are doubled.
-- Returns {'OK', the events' cursors…} (stamped: then the TIME's seconds
-- and microseconds), {'CONFLICT', why} or
-- {'INVALID', why} (an attachment of a card that is not there, or is
-- archived, as the change leaves it).
local prefix = ARGV[1]
local stamping = ARGV[2] == '1'
local at = 3

local function section(width)
  local n = small(ARGV[at])
  local first = at + 1
  at = first + n * width
  return first, n
end

local cards, ncards = section(7)
local checks, nchecks = section(2)
local links, nlinks = section(2)
local unlinks, nunlinks = section(2)
local comments, ncomments = section(3)
local attachments, nattachments = section(4)
local runs, nruns = section(5)
local events, nevents = section(4)
local instants, ninstants = section(2)

-- Check.
local old = {}
for i = 0, ncards - 1 do
  local a = cards + i * 7
  local id, board, key, from = ARGV[a], ARGV[a + 1], ARGV[a + 3], ARGV[a + 4]
  local v = redis.call('HMGET', kb_key(prefix, 'c:' .. id), 'v', 'b', 's', 'k')
  if from == '0' then
    if v[1] then
      return {'CONFLICT', 'card ' .. id .. ' exists'}
    end
  elseif v[1] ~= from then
    return {'CONFLICT', 'card ' .. id .. ' moved on from version ' .. from .. ': read it again'}
  end
  if key ~= '' and key ~= v[4] then
    local holder = redis.call('HGET', kb_key(prefix, 'key:' .. board), key)
    if holder and holder ~= id then
      return {'CONFLICT', 'another card of board ' .. board .. ' has idempotency key ' .. key}
    end
  end
  old[i] = v
end
for i = 0, nchecks - 1 do
  local a = checks + i * 2
  if redis.call('HGET', kb_key(prefix, 'c:' .. ARGV[a]), 'v') ~= ARGV[a + 1] then
    return {'CONFLICT', 'card ' .. ARGV[a] .. ' moved on from version ' .. ARGV[a + 1] .. ': read it again'}
  end
end
-- A card's status as this change leaves it: its new one when the
-- change writes it, else the stored one (nil: no such card).
local status_after = {}
for i = 0, ncards - 1 do
  local a = cards + i * 7
  status_after[ARGV[a]] = ARGV[a + 2]
end
for i = 0, nattachments - 1 do
  local a = attachments + i * 4
  local card, name = ARGV[a], ARGV[a + 1]
  local st = status_after[card] or redis.call('HGET', kb_key(prefix, 'c:' .. card), 's')
  if not st then
    return {'INVALID', 'attachment ' .. name .. ': no card ' .. card}
  end
  if st == 'archived' then
    return {'INVALID', 'attachment ' .. name .. ': card ' .. card .. ' is archived'}
  end
  if redis.call('HEXISTS', kb_key(prefix, 'att:' .. card), name) == 1 then
    return {'CONFLICT', 'card ' .. card .. ' has an attachment named ' .. name}
  end
end

-- Write, stamped first when asked: each instant's text made once, and
-- each encoding with marks formatted with them (kb_stamp).
local now_s, now_us
local texts = {}
if stamping then
  local t = redis.call('TIME')
  now_s, now_us = tonumber(t[1]), tonumber(t[2])
  for k = 1, ninstants do
    local a = instants + (k - 1) * 2
    texts[k] = kb_instant(now_s, now_us, tonumber(ARGV[a]), tonumber(ARGV[a + 1]))
  end
end
local function stamp(body, marks)
  return kb_stamp(body, marks, texts)
end
-- A run's score, its start in ms, is stamped as its start is.
local function stamp_ms(ms)
  local n = tonumber(ms)
  if stamping and n >= 0 and n < 31536000000 then
    return string.format('%d', now_s * 1000 + math.floor(now_us / 1000) + n)
  end
  return ms
end

-- Write.
for i = 0, ncards - 1 do
  local a = cards + i * 7
  local id, board, status, key, from = ARGV[a], ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], ARGV[a + 4]
  local v = old[i]
  local kept = v[1] and v[2] == board and v[4] == key
  -- A card that keeps its board and key has only its version, encoding
  -- and status written, and its key's entry left as it is.
  if kept then
    redis.call('HSET', kb_key(prefix, 'c:' .. id), 'v', int(tonumber(from) + 1), 'j', stamp(ARGV[a + 5], ARGV[a + 6]), 's', status)
  else
    redis.call('HSET', kb_key(prefix, 'c:' .. id), 'v', int(tonumber(from) + 1), 'j', stamp(ARGV[a + 5], ARGV[a + 6]), 'b', board, 's', status, 'k', key)
  end
  local set = kb_key(prefix, 'st:' .. board .. ':' .. status)
  if v[1] and (v[2] ~= board or v[3] ~= status) then
    -- One command; SMOVE adds nothing when the card is not in its old
    -- set, and then SADD does.
    if redis.call('SMOVE', kb_key(prefix, 'st:' .. v[2] .. ':' .. v[3]), set, id) == 0 then
      redis.call('SADD', set, id)
    end
  else
    redis.call('SADD', set, id)
  end
  if v[1] and v[4] ~= '' and v[4] ~= key then
    redis.call('HDEL', kb_key(prefix, 'key:' .. v[2]), v[4])
  end
  if key ~= '' and not kept then
    redis.call('HSET', kb_key(prefix, 'key:' .. board), key, id)
  end
end
for i = 0, nlinks - 1 do
  local a = links + i * 2
  redis.call('SADD', kb_key(prefix, 'ch:' .. ARGV[a]), ARGV[a + 1])
  redis.call('SADD', kb_key(prefix, 'p:' .. ARGV[a + 1]), ARGV[a])
end
for i = 0, nunlinks - 1 do
  local a = unlinks + i * 2
  redis.call('SREM', kb_key(prefix, 'ch:' .. ARGV[a]), ARGV[a + 1])
  redis.call('SREM', kb_key(prefix, 'p:' .. ARGV[a + 1]), ARGV[a])
end
for i = 0, ncomments - 1 do
  local a = comments + i * 3
  redis.call('RPUSH', kb_key(prefix, 'cm:' .. ARGV[a]), stamp(ARGV[a + 1], ARGV[a + 2]))
end
for i = 0, nattachments - 1 do
  local a = attachments + i * 4
  redis.call('HSET', kb_key(prefix, 'att:' .. ARGV[a]), ARGV[a + 1], stamp(ARGV[a + 2], ARGV[a + 3]))
end
for i = 0, nruns - 1 do
  local a = runs + i * 5
  redis.call('SET', kb_key(prefix, 'r:' .. ARGV[a]), stamp(ARGV[a + 3], ARGV[a + 4]))
  redis.call('ZADD', kb_key(prefix, 'runs:' .. ARGV[a + 1]), stamp_ms(ARGV[a + 2]), ARGV[a])
end
local out = {'OK'}
for i = 0, nevents - 1 do
  local a = events + i * 4
  -- The stream ids are the cursors: the server makes them, never going
  -- back (an event's own time is in its encoding).
  local sid = redis.call('XADD', kb_key(prefix, 'ev:' .. ARGV[a]), '*', 'e', stamp(ARGV[a + 2], ARGV[a + 3]))
  if ARGV[a + 1] ~= '' then
    redis.call('RPUSH', kb_key(prefix, 'evc:' .. ARGV[a + 1]), sid)
  end
  out[#out + 1] = sid
end
if stamping then
  out[#out + 1] = now_s
  out[#out + 1] = now_us
end
return out
