-- ctl_write writes a controller's state whole over the version its
-- writer read ('0': none is stored), and files it in its conversation's
-- index and, when it fires on time, in the due index (else takes it
-- out). It returns nil, or the stored version ('' for none) when that is
-- not the one read, having written nothing.
--   state   the state's hash (its fields: ctl_put.lua)
--   index   the conversation's index of states
--   due     the due index, by due ms
--   member  the state's member in both indexes
--   read    the version read, '0' for none
--   conv, kind, id, data  the state's
--   at      its due time in ms, or '' when it does not fire on time
--   now     the time in ms, the state's updated time
local function ctl_write(state, index, due, member, read, conv, kind, id, data, at, now)
  local v = redis.call('HGET', state, 'v')
  if (read == '0' and v) or (read ~= '0' and v ~= read) then
    return v or ''
  end
  redis.call('HSET', state, 'c', conv, 'k', kind, 'i', id, 'd', data,
    't', at, 'v', int(small(read) + 1), 'u', int(now))
  redis.call('ZADD', index, '0', member)
  if at == '' then
    redis.call('ZREM', due, member)
  else
    redis.call('ZADD', due, at, member)
  end
  return nil
end

-- CTLPUT, a write a turn's commit carries (controllers.Put), is ctl_write
-- that skips a state another writer changed first.
WRITE_OPS.CTLPUT = function(a)
  ctl_write(a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11])
end
