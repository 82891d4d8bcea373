-- inst_list returns the instances of the roll whose record has not run
-- out by the store's clock. It only reads (inst_beat deletes the records
-- that ran out), so it answers when the server refuses writes.
-- KEYS[1] the roll's hash
-- ARGV[1] now in ms, or '' for the server's time
-- Returns '<last seen ms>|<encoded instance>' for each live instance.
local now = now_ms(ARGV[1])
local out = {}
local all = redis.call('HGETALL', KEYS[1])
for i = 2, #all, 2 do
  local exp, rest = string.match(all[i], '^(%d+)|(.*)$')
  if exp and tonumber(exp) > now then
    out[#out + 1] = rest
  end
end
return out
