-- Helpers of the cron scripts (cron_*.lua); cron.go names the keys.

local function cron_key(prefix, suffix)
  return prefix .. 'cron:' .. suffix
end
