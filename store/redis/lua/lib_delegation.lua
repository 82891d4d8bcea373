-- Helpers of the delegation scripts (dlg_*.lua); delegation.go names the
-- keys.

local function dlg_key(prefix, suffix)
  return prefix .. 'dlg:' .. suffix
end

-- CHILD_FIELDS are the fields of a child's hash a reply carries, in this
-- order (childFields in delegation.go): the child as dispatched, status,
-- owner, claim token, claim expiry, progress, result, started and ended
-- (ms), and its steers (a JSON array).
local CHILD_FIELDS = {'t', 's', 'o', 'tok', 'exp', 'p', 'r', 'st', 'en', 'sv'}

-- CMP_FIELDS are the fields of a completion's hash a reply carries, in
-- this order (cmpFields in delegation.go): delegation id, unit, results
-- (a JSON array), total, state, created, delivered (ms), attempts, last
-- error, claim token.
local CMP_FIELDS = {'dl', 'u', 'r', 'n', 'st', 'at', 'dat', 'a', 'e', 'tok'}

-- append_all adds the items of list to out.
local function append_all(out, list)
  for i = 1, #list do
    out[#out + 1] = list[i]
  end
end

-- dlg_child_reply adds a child's id and its CHILD_FIELDS to out.
local function dlg_child_reply(out, prefix, id)
  out[#out + 1] = id
  append_all(out, redis.call('HMGET', dlg_key(prefix, 'c:' .. id), unpack(CHILD_FIELDS)))
end

-- dlg_unit is the completion a child belongs to, as delegation.Unit
-- makes it: '' for the whole delegation, else the child's group or its
-- task index when the delegation's completions are independent.
local function dlg_unit(independent, group, index)
  if independent ~= '1' then
    return ''
  end
  if group and group ~= '' then
    return 'group:' .. group
  end
  return 'task:' .. index
end

-- dlg_create_refused is the refusal of dlg_create and dlg_start, which
-- take the same KEYS (the conversation's active set, the delegation's
-- hash, its children's hashes): {'CONFLICT'} when the delegation or a
-- child exists, {'FULL', the active children} when its children do not
-- fit under limit beside them; else nil.
local function dlg_create_refused(keys, limit)
  for i = 2, #keys do
    if redis.call('EXISTS', keys[i]) == 1 then
      return {'CONFLICT'}
    end
  end
  local running = redis.call('SCARD', keys[1])
  if limit > 0 and running + #keys - 2 > limit then
    return {'FULL', running}
  end
  return nil
end

-- dlg_token grants a child's claim token from the shard's counter
-- (Pdlg:tok, the last token granted): the least number above it, and at
-- least least, that is shard modulo count, so that a token names the
-- shard whose child it fences (tokenShard in delegation.go) and tokens
-- of two shards never meet. In the layout of one server (shard 0 of 1,
-- least 0) that is the counter plus one, an INCR.
local function dlg_token(prefix, shard, count, least)
  local key = dlg_key(prefix, 'tok')
  if count == 1 and least == 0 then
    return redis.call('INCR', key)
  end
  local t = math.max((tonumber(redis.call('GET', key)) or 0) + 1, least)
  t = t + (shard - t) % count
  redis.call('SET', key, int(t))
  return t
end

-- dlg_shard reads a script's shard arguments: the shard's index and the
-- shard count, '' for the layout of one server (0 and 1).
local function dlg_shard(index, count)
  return tonumber(index) or 0, tonumber(count) or 1
end

-- dlg_active reports whether a child's status is pending or running; the
-- store writes no status but those and the terminal ones.
local function dlg_active(status)
  return status == 'pending' or status == 'running'
end

-- dlg_complete is delegation.CompletionFor inside the step that ended
-- the child id of delegation dlg: when every child of its unit has ended
-- with a result, it writes the unit's completion, pending and due now,
-- and returns its id, unit, encoded results (ordered by task index),
-- total, created (ms) and the delegation's body; else nil. An
-- orchestrator's workers ('orc', dlg_start) make none.
local function dlg_complete(prefix, dlg, id, now)
  local dkey = dlg_key(prefix, 'd:' .. dlg)
  local dv = redis.call('HMGET', dkey, 'ind', 'b', 'orc')
  if dv[3] == '1' then
    return nil
  end
  local mine = redis.call('HMGET', dlg_key(prefix, 'c:' .. id), 'g', 'i')
  local unit = dlg_unit(dv[1], mine[1], mine[2])
  local kids = redis.call('LRANGE', dlg_key(prefix, 'kids:' .. dlg), 0, -1)
  local results = {}
  for _, kid in ipairs(kids) do
    local kv = redis.call('HMGET', dlg_key(prefix, 'c:' .. kid), 's', 'g', 'i', 'r')
    if dlg_unit(dv[1], kv[2], kv[3]) == unit then
      if dlg_active(kv[1]) or not kv[4] or kv[4] == '' then
        return nil
      end
      results[#results + 1] = {tonumber(kv[3]), kv[4]}
    end
  end
  table.sort(results, function(a, b) return a[1] < b[1] end)
  local enc = {}
  for i, r in ipairs(results) do
    enc[i] = r[2]
  end
  local cid = 'cmp_' .. dlg
  if unit ~= '' then
    cid = cid .. ':' .. unit
  end
  local at = int(now)
  local rs = '[' .. table.concat(enc, ',') .. ']'
  redis.call('HSET', dlg_key(prefix, 'cmp:' .. cid), 'dl', dlg, 'u', unit, 'r', rs, 'n', int(#kids),
    'st', 'pending', 'next', at, 'at', at, 'a', '0', 'e', '', 'tok', '0')
  redis.call('ZADD', dlg_key(prefix, 'due'), at, cid)
  redis.call('RPUSH', dlg_key(prefix, 'cmps:' .. dlg), cid)
  return {cid, unit, rs, int(#kids), at, dv[2]}
end

-- dlg_end_child records the end of child id, of delegation dlg in the
-- conversation tagged tag, with a terminal status and its encoded result
-- at now: the child out of its conversation's active set, its delegation
-- out of the live sets when no child of it is left running or pending,
-- and, when it is the last of its unit to end, the unit's completion
-- (dlg_complete). The caller takes the child out of the index it was in
-- (the running set, the pending list). It returns {'OK', the child's id
-- and CHILD_FIELDS as ended, then dlg_complete's reply when it made one}:
-- dlg_end's and dlg_stop's reply.
local function dlg_end_child(prefix, id, dlg, tag, status, result, now)
  redis.call('HSET', dlg_key(prefix, 'c:' .. id), 's', status, 'r', result, 'en', int(now), 'o', '', 'exp', '')
  redis.call('SREM', conv_key(prefix, tag, 'dlgact'), id)
  if redis.call('HINCRBY', dlg_key(prefix, 'd:' .. dlg), 'left', -1) <= 0 then
    redis.call('ZREM', dlg_key(prefix, 'live'), dlg)
    redis.call('ZREM', conv_key(prefix, tag, 'dlglive'), dlg)
  end
  local out = {'OK'}
  dlg_child_reply(out, prefix, id)
  local cmp = dlg_complete(prefix, dlg, id, now)
  if cmp then
    append_all(out, cmp)
  end
  return out
end

-- dlg_cmp_reply adds a completion's id, its CMP_FIELDS and its
-- delegation's body to out.
local function dlg_cmp_reply(out, prefix, cid)
  local v = redis.call('HMGET', dlg_key(prefix, 'cmp:' .. cid), unpack(CMP_FIELDS))
  out[#out + 1] = cid
  append_all(out, v)
  out[#out + 1] = redis.call('HGET', dlg_key(prefix, 'd:' .. v[1]), 'b')
end

-- DLGPUT writes a dispatch (delegation.Dispatch): a turn's commit runs it
-- as one of its writes, and dlg_create outside a turn. Written: the
-- delegation's hash (body, conversation tag, independent, children and
-- children left to end, created ms, and in the sharded layout the
-- dispatch's sequence, which orders dispatches of one millisecond
-- across shards), its children's ids in dispatch
-- order, a hash per child (its delegation, index and group, which the
-- completion rule reads, the child as dispatched, status pending), the
-- delegation in the sorted sets of all and of the conversation's. When
-- the children fit under the limit beside the conversation's active ones
-- (its set of them, counted here, in the step that writes), they go at
-- the end of the pending list and into the active set, and the
-- delegation into the live sets. When they do not, each child is ended
-- rejected with its result and the places left as free_slots, and the
-- completions those ends make are written (dlg_end_child), so the turn
-- is saved and the refusal comes back as any result does.
--   a[1] key prefix        a[2] delegation id   a[3] conversation tag
--   a[4] limit, 0 for none a[5] body            a[6] independent, '1' or '0'
--   a[7] created ms, '' for now                 a[8] now ms
--   a[9] n, then n groups of 5: child id, index, group, the child as
--   dispatched, its rejected result encoded without free_slots
--   a[10 + 5n] the dispatch's sequence, '' for none (the layout of one
--   server)
WRITE_OPS.DLGPUT = function(a)
  local prefix, id, tag, limit, n = a[1], a[2], a[3], small(a[4]), small(a[9])
  local now = tonumber(a[8])
  local at = a[7]
  if at == '' then
    at = int(now)
  end
  local act = conv_key(prefix, tag, 'dlgact')
  local running = redis.call('SCARD', act)
  local full = limit > 0 and running + n > limit
  local dkey = dlg_key(prefix, 'd:' .. id)
  redis.call('HSET', dkey, 'b', a[5], 'ct', tag, 'ind', a[6], 'n', int(n), 'left', int(n), 'at', at)
  local seq = a[10 + 5 * n]
  if seq and seq ~= '' then
    redis.call('HSET', dkey, 'q', seq)
  end
  local ids = {}
  for i = 1, n do
    local o = 9 + (i - 1) * 5
    ids[i] = a[o + 1]
    redis.call('HSET', dlg_key(prefix, 'c:' .. a[o + 1]), 'd', id, 'i', a[o + 2], 'g', a[o + 3], 'ct', tag,
      't', a[o + 4], 's', 'pending')
  end
  redis.call('RPUSH', dlg_key(prefix, 'kids:' .. id), unpack(ids))
  redis.call('ZADD', dlg_key(prefix, 'all'), at, id)
  redis.call('ZADD', conv_key(prefix, tag, 'dlg'), at, id)
  if not full then
    redis.call('RPUSH', dlg_key(prefix, 'pending'), unpack(ids))
    redis.call('ZADD', dlg_key(prefix, 'live'), at, id)
    redis.call('ZADD', conv_key(prefix, tag, 'dlglive'), at, id)
    redis.call('SADD', act, unpack(ids))
    return
  end
  local free = limit - running
  if free < 0 then
    free = 0
  end
  for i = 1, n do
    local o = 9 + (i - 1) * 5
    local r = string.sub(a[o + 5], 1, -2) .. ',"free_slots":' .. int(free) .. '}'
    dlg_end_child(prefix, a[o + 1], id, tag, 'rejected', r, now)
  end
end
