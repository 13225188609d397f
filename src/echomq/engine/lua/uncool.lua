-- uncool.lua: end a lane's cool now; it rejoins the ring (with a wake token) if serviceable.
-- A paused lane stays paused.
-- KEYS[1] root   `emq:{q}:`
-- ARGV[1] group  the lane
-- Returns 1 when it was cooling, 0 when it was not.
return uncool_lane(KEYS[1], ARGV[1], now_ms())
