-- claim.lua: lease the head job of the lane whose turn it is (fair lanes, weighted round robin).
-- KEYS[1] root   `emq:{q}:`
-- ARGV[1] lease  ms the lease lasts (server clock); > 0
-- ARGV[2] max    most jobs to claim from the one lane (1 = claim; > 1 = claim_batch)
-- Returns {group, deadline_ms, id1, payload1, attempts1, id2, …} on success;
--         nil when nothing is claimable (queue paused, at its concurrency ceiling, no lane);
--         a positive integer n: the queue's rate window is spent, try again in n ms;
--         a negative integer -n: nothing claimable now, a rate-limited lane returns in n ms.
-- Gates, in order: queue paused, queue concurrency, ring empty, queue rate window.
-- The head lane is served up to its weight in consecutive claims per visit (`turn` counts them),
-- then the ring rotates one step. A batch takes up to `max` heads of one lane on one lease,
-- clamped to every headroom (lane ceiling, lane rate, queue ceiling, queue rate).
local root = KEYS[1]
local lease, want = tonumber(ARGV[1]), tonumber(ARGV[2])
local ring, meta, active, turn = root .. 'ring', root .. 'meta', root .. 'active', root .. 'turn'

local cfg = redis.call('HMGET', meta, 'paused', 'concurrency', 'max', 'window')
if cfg[1] then return nil end
local ceiling = tonumber(cfg[2] or '0')
if ceiling > 0 then
  local room = ceiling - redis.call('ZCARD', active)
  if room <= 0 then return nil end
  if want > room then want = room end
end

local now = now_ms()
local g
for _ = 1, redis.call('LLEN', ring) do
  local head = redis.call('LINDEX', ring, 0)
  if serviceable(root, head) then g = head break end
  -- Defensive: a lane that is not serviceable never stays on the ring.
  redis.call('LPOP', ring)
  bench(root, head, now)
end
if not g then
  local due = redis.call('ZRANGE', root .. 'rdue', 0, 0, 'WITHSCORES')
  if due[2] then return -math.max(1, tonumber(due[2]) - now) end
  return nil
end

local qmax = tonumber(cfg[3] or '0')
local limiter = root .. 'limiter'
if qmax > 0 then
  local spent = tonumber(redis.call('GET', limiter) or '0')
  if spent >= qmax then
    local ttl = redis.call('PTTL', limiter)
    if ttl > 0 then return ttl end
    redis.call('DEL', limiter) -- a counter that lost its expiry would block forever
  elseif want > qmax - spent then
    want = qmax - spent
  end
end

local limit = redis.call('HGET', root .. 'glimit', g)
local gactive = tonumber(redis.call('HGET', root .. 'gactive', g) or '0')
if limit and want > tonumber(limit) - gactive then want = tonumber(limit) - gactive end
local rmax, rwindow = lane_rate(root, g)
local glimiter = lane_limiter_of(root, g)
if rmax then
  local left = rmax - tonumber(redis.call('GET', glimiter) or '0')
  if want > left then want = left end
end

local lane = lane_of(root, g)
local heads = redis.call('ZPOPMIN', lane, want)
local n = #heads / 2
local deadline = now + lease
local out = {g, deadline}
for i = 1, #heads, 2 do
  local id = heads[i]
  local row = root .. 'job:' .. id
  local attempts = redis.call('HINCRBY', row, 'attempts', 1)
  local fields = redis.call('HMGET', row, 'payload')
  redis.call('HSET', row, 'state', 'active')
  redis.call('ZADD', active, deadline, id)
  out[#out + 1] = id
  out[#out + 1] = fields[1]
  out[#out + 1] = attempts
end
redis.call('HINCRBY', root .. 'gactive', g, n)

if qmax > 0 and redis.call('INCRBY', limiter, n) == n then
  redis.call('PEXPIRE', limiter, tonumber(cfg[4]))
end
if rmax and redis.call('INCRBY', glimiter, n) == n then
  redis.call('PEXPIRE', glimiter, rwindow)
end

if redis.call('ZCARD', lane) == 0 then redis.call('SREM', root .. 'lanes', g) end

-- Weighted round robin: stay at the head until the lane used its weight, then rotate.
if not serviceable(root, g) then
  redis.call('LPOP', ring)
  redis.call('DEL', turn)
  bench(root, g, now)
else
  local weight = tonumber(redis.call('HGET', root .. 'gweight', g) or '1')
  local served = n
  local last = redis.call('HMGET', turn, 'group', 'served')
  if last[1] == g then served = served + tonumber(last[2]) end
  if served >= weight then
    redis.call('LMOVE', ring, ring, 'LEFT', 'RIGHT')
    redis.call('DEL', turn)
  else
    redis.call('HSET', turn, 'group', g, 'served', served)
  end
end
return out
