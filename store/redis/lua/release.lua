-- release gives a lease back.
-- KEYS[1] conversation state hash
-- KEYS[2] ready sorted set
-- KEYS[3] leases sorted set
-- ARGV[1] key prefix
-- ARGV[2] conversation tag
-- ARGV[3] lease token
-- ARGV[4] now in ms, or '' for the server's time
-- Returns {'LOST'} or {'OK'}.
if not lease_ok(KEYS[1], ARGV[3]) then
  return {'LOST'}
end
release(ARGV[1], ARGV[2], KEYS[1], KEYS[2], KEYS[3], now_ms(ARGV[4]))
return {'OK'}
