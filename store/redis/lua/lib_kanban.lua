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
