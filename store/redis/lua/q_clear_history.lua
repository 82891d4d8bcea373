-- q_clear_history empties a conversation's history. It also moves the
-- conversation's fence, so that a process that kept the history from
-- before (see histcache.go) reads it again at the next grant; the lease
-- token stays, so a holder's writes still count.
-- KEYS[1] conversation state hash
-- KEYS[2] history list
-- Returns {'OK'}.
redis.call('DEL', KEYS[2])
if redis.call('EXISTS', KEYS[1]) == 1 then
  redis.call('HINCRBY', KEYS[1], 'fence', 1)
  redis.call('HSET', KEYS[1], 'hl', '0')
end
return {'OK'}
