-- reap.lua: return expired leases to their lanes; dead-letter jobs that stalled too often.
-- KEYS[1] root         `emq:{q}:`
-- ARGV[1] limit        most expired leases to handle in one call; > 0
-- ARGV[2] max_stalled  stalls after which a job is dead with last_error "stalled"; > 0
-- Returns {recovered ids, dead ids}. attempts is untouched: the next claim mints the next token.
local root = KEYS[1]
local limit, max_stalled = tonumber(ARGV[1]), tonumber(ARGV[2])
local active = root .. 'active'
local now = now_ms()
local ceiling = tonumber(redis.call('HGET', root .. 'meta', 'concurrency') or '0')
local active_before = redis.call('ZCARD', active)
local recovered, dead, touched = {}, {}, {}

for _, id in ipairs(redis.call('ZRANGE', active, '-inf', now, 'BYSCORE', 'LIMIT', 0, limit)) do
  redis.call('ZREM', active, id)
  local row = root .. 'job:' .. id
  local g = redis.call('HGET', row, 'group') or '_'
  release(root, g, 1)
  touched[g] = true
  if redis.call('HINCRBY', row, 'stalled', 1) >= max_stalled then
    bury(root, id, row, 'stalled', now)
    dead[#dead + 1] = id
  else
    redis.call('HSET', row, 'state', 'pending')
    push_lane(root, g, id)
    recovered[#recovered + 1] = id
  end
end
for g in pairs(touched) do rering(root, g, now) end
if ceiling > 0 and active_before >= ceiling and #recovered + #dead > 0 then wake(root) end
return {recovered, dead}
