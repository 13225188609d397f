-- _rates.lua: rates (a lane's, the queue's): parsing a stored rate, how long until it admits a
-- claim, how many it admits now, and spending them (_settings.lua carries the spent budget on
-- when a rate changes). A library: each transition gets the helpers it calls
-- (engine/scripts.py).

-- A stored rate: "max:window" (a fixed window of window ms) or "max:window:smooth" (a sliding
-- window: no `window` ms ever hold more than `max` claims). Returns max, window, is_smooth;
-- nil when `rate` is nil, false or "".
local function parse_rate(rate)
  if not rate or rate == '' then return nil, nil, false end
  local max, window, mode = string.match(rate, '^(%d+):(%d+):?(%a*)$')
  if not max then return nil, nil, false end
  return tonumber(max), tonumber(window), mode == 'smooth'
end

-- A rate value as the scripts store it, checked (EMQARG naming `name`) before any write.
local function rate_arg(value, name)
  local max, window, mode = string.match(value, '^(%d+):(%d+):?(%a*)$')
  if not max or (mode ~= '' and mode ~= 'smooth') then
    error({err = 'EMQARG ' .. name .. ' ' .. value .. ': must be "max:window_ms[:smooth]"'})
  end
  int_arg(max, 'max', 1, mode == 'smooth' and 10000 or 1000000000)
  ms_arg(window, 'window', 1)
end

-- The lane's rate budget: its own (`grate`), else the queue's default for lanes (meta `drate`);
-- max, window ms, is_smooth, or nil when unlimited. `default`: meta drate as the caller read it
-- already (false: read, and absent), or nil to read it here.
local function lane_rate(root, g, default)
  local rate = redis.call('HGET', root .. 'grate', g)
  if not rate then
    if default == nil then
      default = redis.call('HGET', root .. 'meta', 'drate')
    end
    rate = default
  end
  return parse_rate(rate)
end

-- Costs. A job spends `cost` units (row `cost`, written only when not 1: 1..1000; meta
-- `costed` marks a queue that admitted one, and only then does the claim read costs). Rates
-- count units, and so does a lane's ceiling: its units in flight are `gactive` (leased jobs)
-- plus `gextra` (the costs above 1 of its leased jobs, written only for such jobs).
local function lane_units(root, g)
  return tonumber(redis.call('HGET', root .. 'gactive', g) or '0')
    + tonumber(redis.call('HGET', root .. 'gextra', g) or '0')
end

-- A leased job of cost `cost` (its row's field: nil or false for 1) joins (+1) or leaves (-1)
-- g's units in flight beyond gactive.
local function extra_moved(root, g, cost, sign)
  if not cost or cost == '1' then return end
  local after = redis.call('HINCRBY', root .. 'gextra', g, sign * (tonumber(cost) - 1))
  if after <= 0 then redis.call('HDEL', root .. 'gextra', g) end
end

-- The lane's concurrency ceiling: its own (`glimit`), else the default (meta `dlimit`); nil
-- for none.
local function lane_ceiling(root, g)
  local limit = redis.call('HGET', root .. 'glimit', g)
      or redis.call('HGET', root .. 'meta', 'dlimit')
  return limit and tonumber(limit)
end

-- ms until a rate (max, window, smooth) admits one more claim, 0 = now. `counter` holds the
-- fixed window's count (its PTTL is the window left), `log` the sliding log.
local function rate_wait(counter, log, max, window, smooth, now)
  if smooth then
    -- The oldest of the newest `max` claims: one more fits once it leaves the window.
    local t = redis.call('LINDEX', log, -max)
    if not t then return 0 end
    return math.max(0, tonumber(t) + window - (now or now_ms()))
  end
  if tonumber(redis.call('GET', counter) or '0') < max then return 0 end
  local ttl = redis.call('PTTL', counter)
  if ttl <= 0 then return 1 end
  return ttl
end

-- ms until a rate admits `cost` more units (clamped to max: a job dearer than the whole
-- budget passes alone once the window is empty), 0 = now.
local function rate_wait_for(counter, log, max, window, smooth, now, cost)
  cost = math.min(cost, max)
  if smooth then
    local t = redis.call('LINDEX', log, cost - 1 - max)
    if not t then return 0 end
    return math.max(0, tonumber(t) + window - now)
  end
  if tonumber(redis.call('GET', counter) or '0') + cost <= max then return 0 end
  local ttl = redis.call('PTTL', counter)
  if ttl <= 0 then return 1 end
  return ttl
end

-- Claims a rate admits now: exact up to want + 1, so that after taking n <= want the caller
-- knows the budget is spent iff the room left is 0 (a fixed window tells its whole room). The
-- sliding log's newest `max` claims decide: k more fit iff the k-th of them (oldest first) has
-- left the window. One LRANGE reads the first min(want + 1, max) of them; from a log shorter
-- than `max`, it answers the newest (the missing oldest positions are free).
local function rate_room(counter, log, max, window, smooth, now, want)
  if not smooth then
    local used = tonumber(redis.call('GET', counter) or '0')
    if used >= max and redis.call('PTTL', counter) == -1 then
      redis.call('DEL', counter) -- a counter that lost its expiry would block forever
      return max
    end
    return max - used
  end
  local cap = math.min(want + 1, max)
  local seen = redis.call('LRANGE', log, -max, cap - max - 1)
  local free = cap - #seen -- positions 1..free hold no claim
  for k = free + 1, cap do
    if tonumber(seen[k - free]) > now - window then return k - 1 end
  end
  return cap
end

-- Spend n claims made at `now`. A sliding log trims itself to its newest `max` once it holds
-- twice that (one LTRIM per `max` claims); a lane's lives one window past its newest claim
-- (`expire`), the queue's one log has no expiry (it is bounded, and one key per queue).
local function rate_spend(counter, log, max, window, smooth, now, n, expire)
  if smooth then
    local kept
    if n == 1 then
      kept = redis.call('RPUSH', log, now)
    else
      local at = {}
      for i = 1, math.min(n, 1000) do at[i] = now end
      for i = 1, n, 1000 do -- unpack takes a bounded number of values
        kept = redis.call('RPUSH', log, unpack(at, 1, math.min(1000, n - i + 1)))
      end
    end
    if kept > 2 * max then redis.call('LTRIM', log, -max, -1) end
    if expire then redis.call('PEXPIRE', log, window) end
    return
  end
  if redis.call('INCRBY', counter, n) == n then redis.call('PEXPIRE', counter, window) end
end
