-- q_claim leases the conversations that have been ready longest, up to max
-- of them, and returns the next entry of each.
-- KEYS[1] ready sorted set (member: conversation tag, score: when a claim
--   may take it)
-- ARGV[1] key prefix
-- ARGV[2] worker name
-- ARGV[3] lease ttl in ms
-- ARGV[4] now in ms, or '' for the server's time
-- ARGV[5] max, how many conversations to claim at most
-- Returns {} when no conversation is ready, else for each conversation
-- claimed, ready longest first, the nine items {tag, token, expires ms,
-- entry id, entry data, enqueued ms, deliveries, {encoded history message,
-- …}, 1 when it has a session controller's state else 0}, one after
-- another.
local prefix, ready, worker, ttl = ARGV[1], KEYS[1], ARGV[2], tonumber(ARGV[3])
local now = now_ms(ARGV[4])
local out = {}
for _ = 1, tonumber(ARGV[5]) do
  local tag, token, exp, id, data, at, deliveries, hist, ctl = claim_next(prefix, ready, worker, ttl, now)
  if not tag then
    break
  end
  local n = #out
  out[n + 1], out[n + 2], out[n + 3], out[n + 4] = tag, token, exp, id
  out[n + 5], out[n + 6], out[n + 7], out[n + 8], out[n + 9] = data, at, deliveries, hist, ctl
end
return out
