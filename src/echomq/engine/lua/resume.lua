-- resume.lua: resume a paused lane and end its cool, if any; it rejoins the ring (with a wake
-- token) if serviceable.
-- KEYS[1] root   `emq:{q}:`
-- ARGV[1] group  the lane
-- Returns 1 when it was paused or cooling, 0 when it was running.
local root, g = KEYS[1], ARGV[1]
local now = now_ms()
local removed = redis.call('SREM', root .. 'paused', g)
local uncooled = uncool_lane(root, g, now)
rering(root, g, now)
return math.max(removed, uncooled)
