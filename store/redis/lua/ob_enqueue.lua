-- ob_enqueue adds one outbox message unless its idempotency key was seen.
-- KEYS: none. Outbox keys derive from the prefix because finish enqueues
-- through the same helper; see doc.go for the layout.
-- ARGV[1] key prefix
-- ARGV[2] encoded message
-- ARGV[3] target, "platform:chat[:thread]"
-- ARGV[4] idempotency key, or ''
-- ARGV[5] next attempt in ms, or '' for now
-- ARGV[6] now in ms, or '' for the server's time
-- ARGV[7] dedupe window in ms
-- Returns {id, 1 if duplicate else 0}.
local id, dup = ob_enqueue(ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], now_ms(ARGV[6]), ARGV[7])
return {id, dup}
