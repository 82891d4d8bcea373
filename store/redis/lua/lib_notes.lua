-- A user's notes are a stream; a note's id is its field k, as its writer
-- named it (sessions.NoteAdd), or, for a note written before notes were
-- named, its entry id.

-- note_add adds a note named id to the stream key, unless one of that
-- name is there. Returns the note's time in ms.
local function note_add(key, id, text, at)
  for _, e in ipairs(redis.call('XRANGE', key, '-', '+')) do
    local f = e[2]
    for i = 1, #f, 2 do
      if f[i] == 'k' and f[i + 1] == id then
        return nil
      end
    end
  end
  redis.call('XADD', key, '*', 't', text, 'at', int(at), 'k', id)
  return at
end

-- note_del removes the note named id from the stream key. Returns 1, or
-- 0 when there is none.
local function note_del(key, id)
  for _, e in ipairs(redis.call('XRANGE', key, '-', '+')) do
    local name = e[1]
    local f = e[2]
    for i = 1, #f, 2 do
      if f[i] == 'k' then
        name = f[i + 1]
      end
    end
    if name == id then
      return redis.call('XDEL', key, e[1])
    end
  end
  return 0
end

-- NOTEADD and NOTEDEL, writes a turn's commit carries (sessions.NoteAdd,
-- sessions.NoteRemove): key, id, text, now ms; key, id.
WRITE_OPS.NOTEADD = function(a)
  note_add(a[1], a[2], a[3], tonumber(a[4]))
end
WRITE_OPS.NOTEDEL = function(a)
  note_del(a[1], a[2])
end
