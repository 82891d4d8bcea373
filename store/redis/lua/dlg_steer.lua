-- dlg_steer records a steer of a running child (delegation Store.Steer):
-- appended to the JSON array of its steers, and counted, so that its end
-- (dlg_end) is checked against the count.
-- KEYS[1] the child's hash
-- ARGV[1] the steer, encoded as a JSON string
-- ARGV[2] the most steers a child takes
-- Returns {'OK'}, {'NOTFOUND'}, {'STATE', the child's status} when it is
-- not running, or {'FULL'}.
local v = redis.call('HMGET', KEYS[1], 's', 'sv', 'sn')
if not v[1] then
  return {'NOTFOUND'}
end
if v[1] ~= 'running' then
  return {'STATE', v[1]}
end
local n = small(v[3])
if n >= small(ARGV[2]) then
  return {'FULL'}
end
local sv = '[' .. ARGV[1] .. ']'
if v[2] and v[2] ~= '' then
  sv = string.sub(v[2], 1, -2) .. ',' .. ARGV[1] .. ']'
end
redis.call('HSET', KEYS[1], 'sv', sv, 'sn', int(n + 1))
return {'OK'}
