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

-- The names of the members of a card, its claim and stop request, a
-- run, an event, a comment and an attachment that are instants.
local KB_INSTANTS = {
  created_at = true, updated_at = true, ready_at = true, completed_at = true, retry_at = true, scheduled_at = true,
  expires = true, heartbeat = true, started = true, at = true, started_at = true, ended_at = true,
}

-- The days before each month of 1970.
local KB_MONTH_DAYS = {0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334}

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

-- kb_stamp is an encoding stamped at the server's TIME (now_s seconds,
-- now_us microseconds), as kanban.Change.Stamped stamps: each instant of
-- 1970 (a member named as an instant is) becomes that time plus its
-- offset from 1970-01-01T00:00:00Z (kanban.StampBase).
local function kb_stamp(body, now_s, now_us)
  return (string.gsub(body, '"([%a_]+)":"1970%-(%d%d)%-(%d%d)T(%d%d):(%d%d):(%d%d)(%.?%d*)Z"',
    function(name, mo, d, h, mi, s, frac)
      if not KB_INSTANTS[name] then
        return nil
      end
      local ns = now_us * 1000
      if frac ~= '' then
        ns = ns + tonumber(string.sub(string.sub(frac, 2) .. '000000000', 1, 9))
      end
      local secs = now_s + (KB_MONTH_DAYS[tonumber(mo)] + tonumber(d) - 1) * 86400
        + tonumber(h) * 3600 + tonumber(mi) * 60 + tonumber(s)
      secs = secs + math.floor(ns / 1000000000)
      ns = ns % 1000000000
      local days = math.floor(secs / 86400)
      local rest = secs - days * 86400
      local y, m, dd = kb_civil(days)
      return string.format('"%s":"%04d-%02d-%02dT%02d:%02d:%02d.%09dZ"', name, y, m, dd,
        math.floor(rest / 3600), math.floor(rest % 3600 / 60), rest % 60, ns)
    end))
end
