-- promote.lua: move due scheduled jobs back to their own lanes, and return rate-limited lanes
-- whose window ended to the ring (with a wake token). Part of every beat (see tick.lua).
-- KEYS[1] root   `emq:{q}:`
-- ARGV[1] limit  most scheduled jobs to move in one call; > 0
-- Returns {jobs moved, lanes returned}.
return promote_due(KEYS[1], int_arg(ARGV[1], 'limit', 1, 10000), now_ms())
