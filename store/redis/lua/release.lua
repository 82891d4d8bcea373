-- release gives a lease back.
-- KEYS[1] conversation state hash
-- KEYS[2] ready sorted set
-- KEYS[3] leases sorted set
-- ARGV[1] conversation tag
-- ARGV[2] lease token
-- ARGV[3] now in ms, or '' for the server's time
-- Returns {'LOST'} or {'OK'}.
local st = load_state(KEYS[1])
if st.token ~= ARGV[2] then
  return {'LOST'}
end
release(ARGV[1], KEYS[1], KEYS[2], KEYS[3], function() return now_ms(ARGV[3]) end, st.work)
return {'OK'}
