-- promote.lua: move due scheduled jobs back to their own lanes, and return rate-limited lanes
-- whose window ended to the ring. Run by every consumer beat (or the metronome).
-- KEYS[1] root   `emq:{q}:`
-- ARGV[1] limit  most scheduled jobs to move in one call; > 0
-- Returns {jobs moved, lanes returned}.
local root = KEYS[1]
local limit = tonumber(ARGV[1])
local schedule, rdue = root .. 'schedule', root .. 'rdue'
local now = now_ms()
local touched = {}

local due = redis.call('ZRANGE', schedule, '-inf', now, 'BYSCORE', 'LIMIT', 0, limit)
for _, id in ipairs(due) do
  redis.call('ZREM', schedule, id)
  local row = root .. 'job:' .. id
  local g = redis.call('HGET', row, 'group')
  if g then
    redis.call('HSET', row, 'state', 'pending')
    push_lane(root, g, id)
    touched[g] = true
  end
end

local lanes = 0
for _, g in ipairs(redis.call('ZRANGE', rdue, '-inf', now, 'BYSCORE')) do
  redis.call('ZREM', rdue, g)
  touched[g] = true
  lanes = lanes + 1
end
for g in pairs(touched) do rering(root, g, now) end
return {#due, lanes}
