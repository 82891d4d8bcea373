-- once_claim claims a fire for an owner when nobody holds it
-- (once_claim_fire says when).
-- KEYS[1] the fire's hash (fields o owner, tok claim token, exp claim
--         expiry ms, and once done du: until when that counts, ms)
-- KEYS[2] the index of the fires not done, scored by claim expiry (ms)
-- KEYS[3] the token counter
-- ARGV[1] the fire id
-- ARGV[2] the owner
-- ARGV[3] the claim ttl in ms
-- ARGV[4] now in ms, or '' for the server's time
-- Returns {'CLAIMED', token, expiry ms}, {'HELD', owner, token, expiry
-- ms} or {'DONE'}.
local state, owner, tok, exp = once_claim_fire(KEYS[1], KEYS[2], KEYS[3], ARGV[1], ARGV[2],
  tonumber(ARGV[3]), now_ms(ARGV[4]))
if state == 'CLAIMED' then
  return {state, tok, exp}
elseif state == 'HELD' then
  return {state, owner, tok, exp}
end
return {state}
