-- work.lua: whether the queue holds work a worker can still get to, in one atomic read (the
-- idle check of a --burst worker and run_until_idle: several reads would let a job slip
-- between them as it is promoted, claimed or deferred).
-- KEYS[1] root  `emq:{q}:`
-- ARGV[1] horizon ms: a scheduled job counts when it falls due within it (server clock)
-- Returns 1 when there is work: a leased job, a flow entry to relay, a job pending in a lane
-- that is not paused (on a queue that is not paused) and not cooling past the horizon, or one
-- falling due within the horizon; else 0. A pure read.
-- Errors  EMQARG horizon not a whole number of ms in 0 … 10 years
local root = KEYS[1]
local horizon = ms_arg(ARGV[1], 'horizon', 0)
if redis.call('ZCARD', root .. 'active') > 0 then return 1 end
if redis.call('LLEN', root .. 'flow:outbox') > 0 then return 1 end
local now = now_ms()
if redis.call('HEXISTS', root .. 'meta', 'paused') == 0 then
  for _, g in ipairs(redis.call('SMEMBERS', root .. 'lanes')) do
    if redis.call('SISMEMBER', root .. 'paused', g) == 0
      and tonumber(redis.call('HGET', root .. 'cooling', g) or '0') <= now + horizon
      and redis.call('ZCARD', lane_of(root, g)) > 0 then
      return 1
    end
  end
end
if redis.call('ZCOUNT', root .. 'schedule', '-inf', now + horizon) > 0 then return 1 end
return 0
