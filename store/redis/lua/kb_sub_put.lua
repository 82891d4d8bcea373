-- kb_sub_put writes a notification subscription (or a kanban lane's
-- state, with no board) over the version its writer read ('0' to
-- create).
-- KEYS[1] the subscription's hash (fields v version, j encoding, b board)
-- KEYS[2] the index of every subscription (scored 0, by id)
-- ARGV[1] its id
-- ARGV[2] the version read
-- ARGV[3] its board
-- ARGV[4] its encoding
-- Returns {'OK'}, {'CONFLICT'} or {'NOTFOUND'}.
local v = redis.call('HGET', KEYS[1], 'v')
if ARGV[2] == '0' then
  if v then
    return {'CONFLICT'}
  end
elseif not v then
  return {'NOTFOUND'}
elseif v ~= ARGV[2] then
  return {'CONFLICT'}
end
redis.call('HSET', KEYS[1], 'v', int(tonumber(ARGV[2]) + 1), 'j', ARGV[4], 'b', ARGV[3])
redis.call('ZADD', KEYS[2], '0', ARGV[1])
return {'OK'}
