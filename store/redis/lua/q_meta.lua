-- q_meta returns the conversation's metadata and the entry a live lease
-- holds it with (sessions.Store.Meta).
-- KEYS[1] conversation state hash
-- KEYS[2] conversation metadata hash
-- ARGV[1] key prefix
-- ARGV[2] conversation tag
-- ARGV[3] now in ms, or '' for the server's time
-- Returns {the metadata as a flat field/value list}, then, when a live
-- lease holds the conversation with an entry handed out, that entry's
-- id, data and the ms it was handed out at (see running).
local meta = redis.call('HGETALL', KEYS[2])
local id, data, since = running(ARGV[1], ARGV[2], KEYS[1], now_ms(ARGV[3]))
if id then
  return {meta, id, data, since}
end
return {meta}
