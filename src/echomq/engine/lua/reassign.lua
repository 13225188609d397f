-- reassign.lua: move a pending job to another lane (urgency is a lane, not a priority number).
-- KEYS[1] root   `emq:{q}:`
-- ARGV[1] id     the job id
-- ARGV[2] group  the destination lane
-- Returns 1 moved, 2 already there, 0 gone.
-- Errors  EMQSTATE the job is not pending in a lane.
local root, id, dst = KEYS[1], ARGV[1], ARGV[2]
local row = root .. 'job:' .. id
local fields = redis.call('HMGET', row, 'state', 'group')
if not fields[1] then return 0 end
if fields[1] ~= 'pending' then
  return redis.error_reply('EMQSTATE reassign refused: job ' .. id .. ' is ' .. fields[1])
end
local src = fields[2] or '_'
if src == dst then return 2 end
local now = now_ms()
redis.call('ZREM', lane_of(root, src), id)
lane_shrank(root, src)
redis.call('HSET', row, 'group', dst)
push_lane(root, dst, id)
rering(root, dst, now)
return 1
