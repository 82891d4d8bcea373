-- sig_append appends to the signals log and forgets signals older than the
-- keep window.
-- KEYS[1] signals stream: the one of the one-server layout, or the one of
--   the signal's conversation's shard
-- ARGV[1] now in ms, or '' for the server's time
-- ARGV[2] keep window in ms
-- ARGV[3] conversation
-- ARGV[4] kind
-- ARGV[5] entry id or ''
-- ARGV[6] text or ''
-- ARGV[7] message id or ''
-- ARGV[8] target or '' (what inside the conversation a domain's signal is
--   for: a sub-agent's id)
-- Returns {cursor}.
local now = now_ms(ARGV[1])
-- The id is made from the store's clock, not the server's ('*'), so that
-- trimming by MINID and the ids agree on what "an hour ago" is, with a
-- test's fake clock too. It must still grow past the last id when the
-- clock stands still or steps back.
local ms, seq = now, 0
local last = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)
if last[1] then
  local lms, lseq = string.match(last[1][1], '^(%d+)%-(%d+)$')
  lms = tonumber(lms)
  if lms >= now then
    ms, seq = lms, tonumber(lseq) + 1
  end
end
local fields = {'c', ARGV[3], 'k', ARGV[4], 'e', ARGV[5], 't', ARGV[6], 'm', ARGV[7], 'tg', ARGV[8], 'at', int(now)}
-- Exact trimming: signals are few, and exact keeps the log's bound plain.
local minid = int(math.max(now - tonumber(ARGV[2]), 0))
local id = redis.pcall('XADD', KEYS[1], 'MINID', '=', minid, int(ms) .. '-' .. int(seq), unpack(fields))
if type(id) == 'table' and id.err then
  -- The stream's last id is past its last entry (entries deleted by
  -- hand): let the stream pick an id above it.
  id = redis.call('XADD', KEYS[1], 'MINID', '=', minid, '*', unpack(fields))
end
return {id}
