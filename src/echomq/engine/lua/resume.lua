-- resume.lua: resume a paused lane; it rejoins the ring (with a wake token) if serviceable.
-- KEYS[1] root   `emq:{q}:`
-- ARGV[1] group  the lane
-- Returns 1 when it was paused, 0 when it was running.
local root, g = KEYS[1], ARGV[1]
local removed = redis.call('SREM', root .. 'paused', g)
rering(root, g, now_ms())
return removed
