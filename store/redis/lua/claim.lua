-- claim leases the conversation that has been ready longest and returns its
-- next entry.
-- KEYS[1] ready sorted set (member: conversation tag, score: when a claim
--   may take it)
-- ARGV[1] key prefix
-- ARGV[2] worker name
-- ARGV[3] lease ttl in ms
-- ARGV[4] now in ms, or '' for the server's time
-- Returns {} when no conversation is ready, else
-- {tag, token, expires ms, entry id, entry data, enqueued ms, deliveries,
-- {encoded history message, …}}.
local tag, token, exp, id, data, at, deliveries, hist =
  claim_next(ARGV[1], KEYS[1], ARGV[2], tonumber(ARGV[3]), now_ms(ARGV[4]))
if not tag then
  return {}
end
return {tag, token, exp, id, data, at, deliveries, hist}
