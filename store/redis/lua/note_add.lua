-- note_add stores a note about a user.
-- KEYS[1] the user's notes stream
-- ARGV[1] the note's id
-- ARGV[2] text
-- ARGV[3] now in ms, or '' for the server's time
-- Returns {at ms}.
local at = now_ms(ARGV[3])
note_add(KEYS[1], ARGV[1], ARGV[2], at)
return {at}
