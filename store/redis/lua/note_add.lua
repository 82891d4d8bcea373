-- note_add stores a note about a user.
-- KEYS[1] the user's notes stream
-- ARGV[1] text
-- ARGV[2] now in ms, or '' for the server's time
-- Returns {note id, at ms}.
local at = now_ms(ARGV[2])
local id = redis.call('XADD', KEYS[1], '*', 't', ARGV[1], 'at', int(at))
return {id, at}
