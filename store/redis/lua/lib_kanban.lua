-- Helpers of the kanban scripts (kb_*.lua); kanban.go names the keys.

local function kb_key(prefix, suffix)
  return prefix .. 'kb:' .. suffix
end

-- kb_card_reply adds a card to out: its id, version, encoding, its
-- parents' count and ids, its children's count and ids; nothing when
-- the card does not exist.
local function kb_card_reply(out, prefix, id)
  local v = redis.call('HMGET', kb_key(prefix, 'c:' .. id), 'v', 'j')
  if not v[1] then
    return
  end
  out[#out + 1] = id
  out[#out + 1] = v[1]
  out[#out + 1] = v[2]
  for _, rel in ipairs({'p:', 'ch:'}) do
    local ids = redis.call('SMEMBERS', kb_key(prefix, rel .. id))
    table.sort(ids)
    out[#out + 1] = #ids
    for _, x in ipairs(ids) do
      out[#out + 1] = x
    end
  end
end

-- kb_civil is the year, month and day of days since 1970-01-01.
local function kb_civil(days)
  days = days + 719468
  local era = math.floor(days / 146097)
  local doe = days - era * 146097
  local yoe = math.floor((doe - math.floor(doe / 1460) + math.floor(doe / 36524) - math.floor(doe / 146096)) / 365)
  local doy = doe - (365 * yoe + math.floor(yoe / 4) - math.floor(yoe / 100))
  local mp = math.floor((5 * doy + 2) / 153)
  local d = doy - math.floor((153 * mp + 2) / 5) + 1
  local m = mp < 10 and mp + 3 or mp - 9
  local y = yoe + era * 400
  if m <= 2 then
    y = y + 1
  end
  return y, m, d
end

-- kb_seconds keeps, from call to call, the RFC 3339 text of the last
-- seconds stamped, to the second, by the second since 1970
-- (kb_nseconds of them, at most 64): the date and the time of day are
-- most of what making an instant's text costs, and the calls of one
-- second all stamp within it.
local kb_seconds, kb_nseconds = {}, 0

-- kb_instant is the RFC 3339 text of the server's TIME (now_s seconds,
-- now_us microseconds) plus an offset of off_s seconds and off_ns
-- nanoseconds.
local function kb_instant(now_s, now_us, off_s, off_ns)
  local ns = now_us * 1000 + off_ns
  local secs = now_s + off_s + math.floor(ns / 1000000000)
  ns = ns % 1000000000
  local text = kb_seconds[secs]
  if not text then
    local days = math.floor(secs / 86400)
    local rest = secs - days * 86400
    local y, m, d = kb_civil(days)
    text = string.format('%04d-%02d-%02dT%02d:%02d:%02d', y, m, d,
      math.floor(rest / 3600), math.floor(rest % 3600 / 60), rest % 60)
    if kb_nseconds == 64 then
      kb_seconds, kb_nseconds = {}, 0
    end
    kb_seconds[secs], kb_nseconds = text, kb_nseconds + 1
  end
  return text .. string.format('.%09dZ', ns)
end

-- kb_stamp is an encoding stamped: as given when it has no marks, else
-- its string.format text (its % doubled, its instants %s items) with
-- the texts of its marks, one byte an instant, each its place in texts.
-- One format makes the stamped encoding with no string but the result:
-- what stamping costs goes mostly with the bytes of the strings it
-- makes, and finding marks in the encoding made the parts between them
-- too, or stepped through it byte by byte with a pattern.
local function kb_stamp(body, marks, texts)
  if marks == '' then
    return body
  end
  -- Up to four instants (a card's most, claimed) are given to format
  -- as they are, without a table of them to unpack.
  local n = #marks
  if n == 1 then
    return string.format(body, texts[string.byte(marks)])
  elseif n == 2 then
    local a, b = string.byte(marks, 1, 2)
    return string.format(body, texts[a], texts[b])
  elseif n == 3 then
    local a, b, c = string.byte(marks, 1, 3)
    return string.format(body, texts[a], texts[b], texts[c])
  elseif n == 4 then
    local a, b, c, d = string.byte(marks, 1, 4)
    return string.format(body, texts[a], texts[b], texts[c], texts[d])
  end
  local items = {}
  for k = 1, n do
    items[k] = texts[string.byte(marks, k)]
  end
  return string.format(body, unpack(items))
end
