-- reap.lua: return expired leases to their lanes; dead-letter jobs that stalled too often.
-- Part of every beat (see tick.lua).
-- KEYS[1] root         `emq:{q}:`
-- ARGV[1] limit        most expired leases to handle in one call; > 0
-- ARGV[2] max_stalled  stalls after which a job is dead with last_error "stalled"; > 0
-- Returns {recovered ids, dead ids}. attempts is untouched: the next claim mints the next token.
local limit = int_arg(ARGV[1], 'limit', 1, 10000)
local max_stalled = int_arg(ARGV[2], 'max_stalled', 1, 1000)
return reap_expired(KEYS[1], limit, max_stalled, now_ms())
