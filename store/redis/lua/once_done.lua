-- once_done marks a fire done under its current claim (once_mark_done
-- says what that does).
-- KEYS[1] the fire's hash
-- KEYS[2] the index of the fires not done
-- ARGV[1] the fire id
-- ARGV[2] the claim token
-- ARGV[3] the dedupe window in ms
-- ARGV[4] now in ms, or '' for the server's time
-- Returns {'OK'}, {'LOST'} or {'NOTFOUND'}.
local check = once_check_done(KEYS[1], ARGV[2])
if check == 'AGAIN' then
  return {'OK'}
elseif check ~= 'OK' then
  return {check}
end
once_mark_done(KEYS[1], KEYS[2], ARGV[1], ARGV[3], now_ms(ARGV[4]))
return {'OK'}
