-- reprocess.lua: give a dead job a new life in its lane, with a fresh failure budget.
-- KEYS[1] root  `emq:{q}:`
-- ARGV[1] id    the job id
-- Returns 1 back in its lane, 0 gone.
-- Errors  EMQSTATE the job is not dead.
local root, id = KEYS[1], ARGV[1]
local row = root .. 'job:' .. id
local fields = redis.call('HMGET', row, 'state', 'group', 'attempts')
if not fields[1] then return 0 end
if fields[1] ~= 'dead' then
  return redis.error_reply('EMQSTATE reprocess refused: job ' .. id .. ' is ' .. fields[1])
end
local g = fields[2] or '_'
redis.call('ZREM', root .. 'dead', id)
redis.call('HDEL', row, 'last_error', 'stalled', 'finished', 'traceback')
-- attempts is the fencing token and never goes back; grace resets the failure count.
redis.call('HSET', row, 'state', 'pending', 'grace', fields[3])
push_lane(root, g, id)
rering(root, g, now_ms())
return 1
