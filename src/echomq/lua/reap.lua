-- reap.lua: return expired leases to their lanes; dead-letter jobs that stalled too often.
-- Part of every beat (see tick.lua).
-- KEYS[1] root         `emq:{q}:`
-- ARGV[1] limit        most expired leases to handle in one call; > 0
-- ARGV[2] max_stalled  stalls after which a job is dead with last_error "stalled"; > 0
-- Returns {recovered ids, dead ids}. attempts is untouched: the next claim mints the next token.
return reap_expired(KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2]), now_ms())
