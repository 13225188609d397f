-- lane_limit.lua: set or clear a lane's concurrency ceiling, weight, or rate budget.
-- KEYS[1] root    `emq:{q}:`
-- ARGV[1] group   the lane
-- ARGV[2] field   'glimit' (ceiling, in-flight jobs, <= 10^6), 'gweight' (claims per ring
--                 visit, <= 1000) or 'grate' ("max:window": <= 10^9 jobs per <= 10 years ms)
-- ARGV[3] value   the new value, or "" to clear it
-- Returns 1. The lane joins or leaves the ring at once if its serviceability changed.
-- Errors  EMQARG an unknown field or a value out of bounds (checked before any write).
local root, g, field, value = KEYS[1], ARGV[1], ARGV[2], ARGV[3]
if value ~= '' then
  if field == 'glimit' then
    int_arg(value, 'ceiling', 1, 1000000)
  elseif field == 'gweight' then
    int_arg(value, 'weight', 1, 1000)
  elseif field == 'grate' then
    local max, window = string.match(value, '^(%d+):(%d+)$')
    if not max then error({err = 'EMQARG rate ' .. value .. ': must be "max:window_ms"'}) end
    int_arg(max, 'max', 1, 1000000000)
    ms_arg(window, 'window', 1)
  else
    error({err = 'EMQARG field ' .. tostring(field) .. ': unknown lane setting'})
  end
elseif field ~= 'glimit' and field ~= 'gweight' and field ~= 'grate' then
  error({err = 'EMQARG field ' .. tostring(field) .. ': unknown lane setting'})
end
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
