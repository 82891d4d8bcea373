-- note_del removes a note about a user.
-- KEYS[1] the user's notes stream
-- ARGV[1] the note's id
-- Returns {1}, or {0} when the user has no such note.
return {note_del(KEYS[1], ARGV[1])}
