-- ctl_delete removes a controller's state at the version its writer
-- read, and its places in both indexes.
-- KEYS[1] the state's hash
-- KEYS[2] the conversation's index of states
-- KEYS[3] the due index
-- ARGV[1] the state's member in both indexes
-- ARGV[2] the version read
-- Returns {'OK'}, {'NOTFOUND'} or {'CONFLICT', the stored version}.
local v = redis.call('HGET', KEYS[1], 'v')
if not v then
  return {'NOTFOUND'}
elseif v ~= ARGV[2] then
  return {'CONFLICT', v}
end
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
return {'OK'}
