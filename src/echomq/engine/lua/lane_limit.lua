-- lane_limit.lua: set or clear a lane's concurrency ceiling, weight, rate budget or backlog cap.
-- KEYS[1] root    `emq:{q}:`
-- ARGV[1] group   the lane
-- ARGV[2] field   'glimit' (ceiling, in-flight jobs, <= 10^6), 'gweight' (claims per ring
--                 visit, <= 1000) or 'grate' ("max:window" fixed or "max:window:smooth":
--                 <= 10^9 jobs (10^4 smooth) per <= 10 years ms) or 'gcap' (unfinished
--                 jobs admission lets the lane hold, <= 10^9: enqueue.lua)
-- ARGV[3] value   the new value, or "" to clear it (the lane follows the queue's default)
-- Returns 1 changed, 0 it held that value already (nothing written: applying a setting again
-- grants no fresh budget). A changed rate carries the window in flight on (rate_moved in
-- _settings.lua); the lane joins or leaves the ring at once if its serviceability changed.
-- Errors  EMQARG an unknown field or a value out of bounds (checked before any write).
local root, g, field, value = KEYS[1], ARGV[1], ARGV[2], ARGV[3]
if field ~= 'glimit' and field ~= 'gweight' and field ~= 'grate' and field ~= 'gcap' then
  error({err = 'EMQARG field ' .. tostring(field) .. ': unknown lane setting'})
end
setting_arg(field, value)
return set_lane(root, g, field, value, now_ms())
