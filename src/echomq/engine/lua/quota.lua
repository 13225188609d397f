-- quota.lua: a shard's part of a sharded queue's queue-wide gates, and the rebalancer's lease
-- (docs/concepts/shards.md, "Queue-wide gates across shards"). A shard's quota *is* its
-- queue-level gate: meta `concurrency` (jobs leased at once) and meta `max` (claims per meta
-- `window` ms, meta `mode`); a quota of 0 is not "no limit" but meta `noquota` (its letters:
-- c = concurrency, r = rate), which the claim answers like a pause. Quota moves only as unused
-- room: `give` lowers a shard by at most its room now and answers what it freed, `take` raises
-- one by what the caller freed elsewhere, so on every shard used <= quota at every instant.
-- KEYS[1] root   `emq:{q}:` of the shard (of shard 0 for hold and release)
-- ARGV[1] op, then by op:
--   hold     owner, ttl (ms, 1..60000), force ("1": take the lease from a live holder)
--            -> the fencing token (> 0) while `owner` holds the lease, 0 when another does
--   release  owner -> 1 when it held the lease (ended now), else 0
--   read     [token: fences this shard, as give and take do]
--            -> {concurrency quota, active, rate quota, claims in the window, ringweight (flat
--            field, value list), dweight}; a quota of -1: that gate is not set on the shard
--   give     token, gate ('concurrency' | 'rate'), units (0..10^9) -> {freed, quota}
--   take     token, gate, units (0..10^9) -> the quota
--   set      token, gate, quota ('' clears the gate), window (ms, rate), mode ('smooth' | '')
--            -> the quota (-1: cleared); used to start a gate, never to move quota
-- Errors  EMQSTALE a token older than one this shard has seen (the lease moved on: a paused
--         former holder cannot add quota); EMQARG an unknown op or gate, units out of bounds.
local root, op = KEYS[1], ARGV[1]
local meta, lease = root .. 'meta', root .. 'rebalancer'
local now = now_ms()

if op == 'hold' or op == 'release' then
  local owner = ARGV[2]
  local held = redis.call('HMGET', lease, 'owner', 'until', 'token')
  local live = tonumber(held[2] or '0') > now
  if op == 'release' then
    if held[1] ~= owner or not live then return 0 end
    redis.call('HSET', lease, 'until', 0)
    return 1
  end
  local ttl = int_arg(ARGV[3], 'ttl', 1, 60000)
  if held[1] == owner and held[3] and (live or ARGV[4] ~= '1') then
    -- Its own lease, renewed (after a lapse too: nobody holds a newer token).
    redis.call('HSET', lease, 'until', now + ttl)
    return tonumber(held[3])
  end
  if live and ARGV[4] ~= '1' then return 0 end
  local token = redis.call('HINCRBY', lease, 'token', 1)
  redis.call('HSET', lease, 'owner', owner, 'until', now + ttl)
  return token
end

local cfg = redis.call('HMGET', meta, 'concurrency', 'max', 'window', 'mode', 'noquota')
local noquota = cfg[5] or ''
local letter = {concurrency = 'c', rate = 'r'}

-- The gate's quota now: its meta field, 0 under its noquota letter, -1 when not set.
local function quota_of(gate)
  local value = cfg[2]
  if gate == 'concurrency' then value = cfg[1] end
  if value then return tonumber(value) end
  if string.find(noquota, letter[gate], 1, true) then return 0 end
  return -1
end

-- Claims of the queue's rate in the last window: the sliding log's entries inside it (in time
-- order: a binary search), or the fixed window's count.
local function rate_used()
  local window = tonumber(cfg[3] or '0')
  if window <= 0 then return 0 end
  if cfg[4] ~= 'smooth' then
    if redis.call('PTTL', root .. 'limiter') <= 0 then return 0 end
    return tonumber(redis.call('GET', root .. 'limiter') or '0')
  end
  local log = root .. 'claims'
  local lo, hi = 0, redis.call('LLEN', log) -- the first entry inside the window is in lo..hi
  local n = hi
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    if tonumber(redis.call('LINDEX', log, mid)) > now - window then hi = mid else lo = mid + 1 end
  end
  return n - lo
end

local function used_of(gate)
  if gate == 'concurrency' then return redis.call('ZCARD', root .. 'active') end
  return rate_used()
end

local function fenced(token)
  local seen = tonumber(redis.call('HGET', meta, 'qtoken') or '0')
  if token < seen then
    error({err = 'EMQSTALE quota token ' .. token .. ': the rebalancer lease moved on to ' .. seen})
  elseif token > seen then
    redis.call('HSET', meta, 'qtoken', token)
  end
end

if op == 'read' then
  if ARGV[2] then fenced(int_arg(ARGV[2], 'token', 1, 9007199254740991)) end
  return {quota_of('concurrency'), redis.call('ZCARD', root .. 'active'), quota_of('rate'),
    rate_used(), redis.call('HGETALL', root .. 'ringweight'), redis.call('HGET', meta, 'dweight')}
end

local token, gate = int_arg(ARGV[2], 'token', 1, 9007199254740991), ARGV[3]
if not letter[gate] then
  error({err = 'EMQARG gate ' .. tostring(gate) .. ': must be "concurrency" or "rate"'})
end
fenced(token)

-- The gate's noquota letter on (its quota is 0) or off.
local function mark(zero)
  local rest = string.gsub(noquota, letter[gate], '')
  if zero then rest = rest .. letter[gate] end
  if rest == '' then
    redis.call('HDEL', meta, 'noquota')
  else
    redis.call('HSET', meta, 'noquota', rest)
  end
  noquota = rest
end

-- Write the gate's quota q (>= 0): its field, or its noquota letter at 0.
local function write(q)
  local field = gate == 'concurrency' and 'concurrency' or 'max'
  if q > 0 then redis.call('HSET', meta, field, q) else redis.call('HDEL', meta, field) end
  mark(q == 0)
end

if op == 'set' then
  if ARGV[4] == '' then
    mark(false)
    if gate == 'concurrency' then
      redis.call('HDEL', meta, 'concurrency')
    else
      redis.call('HDEL', meta, 'max', 'window', 'mode')
    end
    wake(root)
    return -1
  end
  local q = int_arg(ARGV[4], 'quota', 0, 1000000000)
  if gate == 'rate' then
    local window, smooth = ms_arg(ARGV[5], 'window', 1), ARGV[6] == 'smooth'
    redis.call('HSET', meta, 'window', window)
    if smooth then
      redis.call('HSET', meta, 'mode', 'smooth')
    else
      redis.call('HDEL', meta, 'mode')
    end
    if q > 0 then rate_moved(root .. 'limiter', root .. 'claims', q, window, smooth, now) end
  end
  write(q)
  wake(root)
  return q
end

local units = int_arg(ARGV[4], 'units', 0, 1000000000)
local q = quota_of(gate)
if q < 0 then error({err = 'EMQARG gate ' .. gate .. ': not set on this shard'}) end
if op == 'give' then
  local freed = math.min(units, math.max(0, q - used_of(gate)))
  if freed > 0 then write(q - freed) end
  return {freed, q - freed}
elseif op == 'take' then
  if units > 0 then
    write(q + units)
    wake(root)
  end
  return q + units
end
error({err = 'EMQARG op ' .. tostring(op) .. ': unknown'})
