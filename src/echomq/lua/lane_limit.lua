-- lane_limit.lua: set or clear a lane's concurrency ceiling, weight, or rate budget.
-- KEYS[1] root    `emq:{q}:`
-- ARGV[1] group   the lane
-- ARGV[2] field   'glimit' (ceiling, in-flight jobs), 'gweight' (claims per ring visit) or
--                 'grate' ("max:window", jobs per window ms)
-- ARGV[3] value   the new value, or "" to clear it
-- Returns 1. The lane joins or leaves the ring at once if its serviceability changed.
local root, g, field, value = KEYS[1], ARGV[1], ARGV[2], ARGV[3]
local hash = root .. field
if value == '' then
  redis.call('HDEL', hash, g)
else
  redis.call('HSET', hash, g, value)
end
if field == 'grate' then
  redis.call('DEL', lane_limiter_of(root, g)) -- a new budget starts a new window
  redis.call('ZREM', root .. 'rdue', g)
end
rering(root, g, now_ms())
return 1
