-- ob_list reads messages of the pending or the dead index, oldest first.
-- KEYS: none; keys derive from the prefix (see doc.go).
-- ARGV[1] key prefix
-- ARGV[2] 'all' for pending messages, 'dead' for dead letters
-- ARGV[3] limit; 0 or less means no limit
-- Returns per message: id, encoded message, attempts, next attempt ms,
-- created ms, last error, parts.
local prefix = ARGV[1]
local limit = tonumber(ARGV[3])
local stop = -1
if limit > 0 then
  stop = limit - 1
end
local ids = redis.call('ZRANGE', ob_key(prefix, ARGV[2]), 0, stop)
if ARGV[2] == 'all' then
  -- Pending messages are in ob:all, except those handed to a delivery
  -- worker as they were enqueued, which are in ob:handed alone (a few:
  -- those in flight). Ids sort in enqueue order, as they are zero-padded
  -- (after the same label, in a shard of a sharded layout).
  local handed = redis.call('ZRANGE', ob_key(prefix, 'handed'), 0, -1)
  if #handed > 0 then
    for _, id in ipairs(handed) do
      ids[#ids + 1] = id
    end
    table.sort(ids)
    if limit > 0 then
      for i = #ids, limit + 1, -1 do
        ids[i] = nil
      end
    end
  end
end
local out = {}
for _, id in ipairs(ids) do
  local v = redis.call('HMGET', ob_key(prefix, 'm:' .. id), unpack(OB_FIELDS))
  if v[1] then
    for _, x in ipairs({id, v[1], v[2], v[3], v[4], v[5] or '', v[6] or ''}) do
      out[#out + 1] = x
    end
  end
end
return out
