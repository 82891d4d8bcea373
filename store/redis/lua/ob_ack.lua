-- ob_ack removes messages the platform accepted, each only while its claim
-- holds, each on its own: one whose claim was lost does not keep the others
-- from being acked.
-- KEYS: none; keys derive from the prefix (see doc.go).
-- ARGV[1] key prefix
-- ARGV[2 ..] triples of message id, claim token and target (as the claim
--   read it; it names the message's target index)
-- Returns a status per triple, in order: 'OK', 'LOST' or 'NOTFOUND'.
local prefix = ARGV[1]
local out = {}
local handed_key = ob_key(prefix, 'handed')

-- A handed message is in ob:handed from the finish that handed it until
-- its claim is settled or, once the claim ran out, the next outbox claim
-- makes it due again; only then can anyone claim it again. While it is
-- there, its claim is the handed one, so when one ZREM takes every
-- message of a batch of handed claims, no message's claim needs reading:
-- each is its holder's still, and all that is left is the DEL. The token
-- of a handed claim is the negated sequence number of the first message
-- handed with it, which the id of each of them is at least; a pair that
-- breaks that, or repeats an id, goes the checked way, as does the whole
-- batch when the ZREM takes fewer than it was given.
local zremmed = false
if #ARGV > 1 then
  local ids, targets, seen = {}, {}, {}
  for i = 2, #ARGV, 3 do
    local id, token = ARGV[i], ARGV[i + 1]
    if not is_handed(token) or seen[id] or (ob_seq(id) or 0) < -(tonumber(token) or 0) then
      ids = nil
      break
    end
    seen[id] = true
    ids[#ids + 1] = id
    targets[#targets + 1] = ARGV[i + 2]
  end
  if ids then
    local _, taken = call_all('ZREM', handed_key, ids, 1, #ids)
    if taken == #ids then
      local mkeys = {}
      for i, id in ipairs(ids) do
        mkeys[i] = ob_key(prefix, 'm:' .. id)
        out[i] = 'OK'
      end
      call_all('DEL', nil, mkeys, 1, #mkeys)
      ob_untarget(prefix, ids, targets)
      ob_let_go(prefix, ids, targets)
      return out
    end
    zremmed = true
  end
end

-- Every message is checked first; the removals then go by index, one
-- command for all the acked messages of an index rather than one each.
local ids, mkeys, byplat, plats, acked, handed, targets = {}, {}, {}, {}, {}, {}, {}
for i = 2, #ARGV, 3 do
  local id = ARGV[i]
  local mkey = ob_key(prefix, 'm:' .. id)
  local platform, err, target
  if acked[id] then
    -- Acked by an earlier triple of this call: gone, as it would be had
    -- that triple's removal come first.
    err = 'NOTFOUND'
  else
    platform, err, target = ob_check(mkey, ARGV[i + 1])
  end
  if err then
    out[#out + 1] = err
  else
    acked[id] = platform
    ids[#ids + 1] = id
    targets[#targets + 1] = target
    mkeys[#mkeys + 1] = mkey
    out[#out + 1] = 'OK'
    if is_handed(ARGV[i + 1]) then
      -- The message is in ob:handed, or, once its claim ran out, due
      -- like any other.
      handed[#handed + 1] = id
    else
      group_add(byplat, plats, platform, id)
    end
  end
end
-- The handed messages still in ob:handed are in no other index: when the
-- ZREM takes them all, that is all there is to remove. Else some were made
-- due after their claims ran out (ob_undue), or were handed by an earlier
-- version, which indexed them as ob_claim does, and every one of them is
-- taken out of the other indexes too, as a claimed message is.
local everywhere = #ids > #handed
local some_gone = zremmed
if not zremmed then
  local _, taken = call_all('ZREM', handed_key, handed, 1, #handed)
  some_gone = taken < #handed
end
if some_gone then
  everywhere = true
  for _, id in ipairs(handed) do
    group_add(byplat, plats, acked[id], id)
  end
end
-- A message with its claim token is in the claimed index, or, when its
-- claim expired and nobody claimed it since, back in the due one.
for _, platform in ipairs(plats) do
  local l = byplat[platform]
  call_all('ZREM', ob_key(prefix, 'due:' .. platform), l, 1, #l)
  call_all('ZREM', ob_key(prefix, 'claimed:' .. platform), l, 1, #l)
end
if everywhere then
  call_all('ZREM', ob_key(prefix, 'all'), ids, 1, #ids)
end
for _, id in ipairs(ids) do
  ob_unwait(prefix, id)
end
call_all('DEL', nil, mkeys, 1, #mkeys)
ob_untarget(prefix, ids, targets)
ob_let_go(prefix, ids, targets)
return out
