-- counts.lua: how many jobs are in each state, and the terminal counters (a pure read).
-- KEYS[1] root  `emq:{q}:`
-- Returns {pending, active, scheduled, dead, completed, failed, lanes, ringed, cancelled,
-- waiting} (waiting: flow parents waiting for their children).
local root = KEYS[1]
local pending = 0
local lanes = redis.call('SMEMBERS', root .. 'lanes')
for _, g in ipairs(lanes) do pending = pending + redis.call('ZCARD', lane_of(root, g)) end
-- Lanes on a ring: the default band's and every other band's in use.
local ringed = redis.call('LLEN', root .. 'ring')
for p in string.gmatch(redis.call('HGET', root .. 'meta', 'bands') or '', '%d') do
  ringed = ringed + redis.call('LLEN', root .. 'band:' .. p .. ':ring')
end
return {
  pending,
  redis.call('ZCARD', root .. 'active'),
  redis.call('ZCARD', root .. 'schedule'),
  redis.call('ZCARD', root .. 'dead'),
  tonumber(redis.call('HGET', root .. 'metrics:completed', 'count') or '0'),
  tonumber(redis.call('HGET', root .. 'metrics:failed', 'count') or '0'),
  #lanes,
  ringed,
  tonumber(redis.call('HGET', root .. 'metrics:cancelled', 'count') or '0'),
  redis.call('ZCARD', root .. 'waiting'),
}
