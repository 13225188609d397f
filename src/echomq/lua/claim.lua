-- claim.lua: lease the head job(s) of the lane whose turn it is (fair lanes, weighted rotation).
-- KEYS[1] root   `emq:{q}:`
-- ARGV[1] lease  ms the lease lasts (server clock); > 0
-- ARGV[2] want   most jobs to claim from the one lane (1 = claim; > 1 = claim_batch)
-- Returns {group, deadline_ms, more, id1, payload1, attempts1, id2, …} on success, where
--         more = 1 while some lane is still on the ring (0 saves the caller an empty claim);
--         nil when nothing is claimable (queue paused, at its concurrency ceiling, no lane);
--         a positive integer n: the queue's rate window is spent, try again in n ms;
--         a negative integer -n: nothing claimable now, a rate-limited lane returns in n ms.
-- Gates, in order: queue paused, queue concurrency, ring empty, queue rate window. Before the
-- ring is read, benched lanes whose rate window has ended rejoin it (as promote does): a
-- consumer kept busy by other lanes runs no upkeep, and would otherwise serve them late.
-- The ring holds exactly the serviceable lanes, so its head can serve at once. The head is
-- served up to its weight in consecutive claims (`turn` counts them), then the ring rotates one
-- step; a lane that stops being serviceable leaves the ring. A batch takes up to `want` heads of
-- one lane on one lease, clamped to every headroom (lane ceiling, lane rate, queue ceiling and
-- rate, and what is left of the lane's turn), so it never pushes gactive past glimit and a
-- batch claim keeps the weighted share a run of single claims would give.
local root = KEYS[1]
local lease = int_arg(ARGV[1], 'lease', 1, 86400000)
local want = int_arg(ARGV[2], 'n', 1, 1000)
local ring, active = root .. 'ring', root .. 'active'

local cfg = redis.call('HMGET', root .. 'meta', 'paused', 'concurrency', 'max', 'window')
if cfg[1] then return nil end
local ceiling = tonumber(cfg[2] or '0')
if ceiling > 0 then
  local room = ceiling - redis.call('ZCARD', active)
  if room <= 0 then return nil end
  if want > room then want = room end
end

local qmax = tonumber(cfg[3] or '0')
local limiter = root .. 'limiter'
if qmax > 0 then
  local spent = tonumber(redis.call('GET', limiter) or '0')
  if spent >= qmax then
    local ttl = redis.call('PTTL', limiter)
    if ttl > 0 then
      if redis.call('LLEN', ring) == 0 then return nil end
      return ttl
    end
    redis.call('DEL', limiter) -- a counter that lost its expiry would block forever
  elseif want > qmax - spent then
    want = qmax - spent
  end
end

local now = now_ms()
local rdue = root .. 'rdue'
for _, due in ipairs(redis.call('ZRANGE', rdue, '-inf', now, 'BYSCORE', 'LIMIT', 0, 16)) do
  redis.call('ZREM', rdue, due)
  rering(root, due, now)
end
local g, n, heads, limit, rmax, rwindow, weight, served
while true do
  g = redis.call('LINDEX', ring, 0)
  if not g then
    local due = redis.call('ZRANGE', rdue, 0, 0, 'WITHSCORES')
    if due[2] then return -math.max(1, tonumber(due[2]) - now) end
    return nil
  end
  local take = want
  limit = redis.call('HGET', root .. 'glimit', g)
  if limit then
    limit = tonumber(limit)
    local room = limit - tonumber(redis.call('HGET', root .. 'gactive', g) or '0')
    if take > room then take = room end
  end
  rmax, rwindow = lane_rate(root, g)
  if rmax then
    local room = rmax - tonumber(redis.call('GET', lane_limiter_of(root, g)) or '0')
    if take > room then take = room end
  end
  -- The lane's turn: `weight` claims per visit, `served` of them spent already.
  weight, served = tonumber(redis.call('HGET', root .. 'gweight', g) or '1'), 0
  if weight > 1 then
    local turn = redis.call('HMGET', root .. 'turn', 'group', 'served')
    if turn[1] == g then served = tonumber(turn[2]) end
  end
  -- A batch takes at most what is left of the turn while other lanes wait (a stale count
  -- still serves one); a lane alone on the ring starts its next turn at once, so no cap.
  if take > 1 and redis.call('LLEN', ring) > 1 then
    take = math.min(take, math.max(1, weight - served))
  end
  if take > 0 then heads = redis.call('ZPOPMIN', lane_of(root, g), take) end
  if take > 0 and #heads > 0 then
    n = #heads / 2
    break
  end
  -- Defensive: a lane that cannot serve never stays on the ring.
  redis.call('LPOP', ring)
  redis.call('DEL', root .. 'turn')
  bench(root, g, now)
end

local deadline = now + lease
local out = {g, deadline, 1}
for i = 1, #heads, 2 do
  local id = heads[i]
  local row = root .. 'job:' .. id
  out[#out + 1] = id
  out[#out + 1] = redis.call('HGET', row, 'payload')
  out[#out + 1] = redis.call('HINCRBY', row, 'attempts', 1)
  redis.call('HSET', row, 'state', 'active')
  redis.call('ZADD', active, deadline, id)
end
local gactive = redis.call('HINCRBY', root .. 'gactive', g, n)
if qmax > 0 and redis.call('INCRBY', limiter, n) == n then
  redis.call('PEXPIRE', limiter, tonumber(cfg[4]))
end
local spent_budget = false
if rmax then
  local glimiter = lane_limiter_of(root, g)
  local used = redis.call('INCRBY', glimiter, n)
  if used == n then redis.call('PEXPIRE', glimiter, rwindow) end
  spent_budget = used >= rmax
end

local emptied = redis.call('ZCARD', lane_of(root, g)) == 0
if emptied then redis.call('SREM', root .. 'lanes', g) end
if emptied or spent_budget or (limit and gactive >= limit) then
  -- No longer serviceable: off the ring; a spent rate budget is benched until its window ends.
  redis.call('LPOP', ring)
  redis.call('DEL', root .. 'turn')
  if spent_budget and not emptied then bench(root, g, now) end
  if redis.call('LLEN', ring) == 0 then out[3] = 0 end
  return out
end
-- Weighted rotation: stay at the head until the lane used its weight this visit.
if weight > 1 then
  if served + n < weight then
    redis.call('HSET', root .. 'turn', 'group', g, 'served', served + n)
    return out
  end
  redis.call('DEL', root .. 'turn')
end
redis.call('LMOVE', ring, ring, 'LEFT', 'RIGHT')
return out
