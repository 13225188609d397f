-- pause.lua: pause one lane. Its backlog and in-flight jobs are untouched; claims skip it.
-- KEYS[1] root   `emq:{q}:`
-- ARGV[1] group  the lane
-- Returns 1 when it was running, 0 when already paused.
local root, g = KEYS[1], ARGV[1]
local added = redis.call('SADD', root .. 'paused', g)
dering(root, g)
return added
