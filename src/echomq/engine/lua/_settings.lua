-- _settings.lua: lane and queue settings as every setter applies them (lane_limit, configure,
-- policy). Idempotent: a process applying its settings at start changes nothing when they are
-- in force already; a change carries the rate state on (rate_moved) instead of granting a
-- fresh budget. A library: each transition gets the helpers it calls (engine/scripts.py).

-- A rate was set to (max, window, smooth) (max nil: removed): the claims already made carry on
-- and count against it, so applying a rate again, or changing it, grants no fresh budget. A
-- fixed window in flight keeps its count and ends when it would have, or one new window from
-- now if that is sooner. Changing mode converts: a fixed window's count becomes that many claims
-- leaving the sliding window when the fixed one would have ended; a sliding log's claims become
-- the count of a fixed window that ends when the oldest of them leaves the new window.
local function rate_moved(counter, log, max, window, smooth, now, expire)
  if not max then return end -- the state expires by itself; a rate set again finds it
  if smooth then
    local used, ttl = tonumber(redis.call('GET', counter) or '0'), redis.call('PTTL', counter)
    redis.call('DEL', counter)
    if used > 0 and ttl > 0 then
      -- Log entries are in time order: the converted ones sort in among any kept.
      local all, t = redis.call('LRANGE', log, 0, -1), now + math.min(ttl, window) - window
      for _ = 1, math.min(used, max) do all[#all + 1] = t end
      table.sort(all, function(a, b) return tonumber(a) < tonumber(b) end)
      redis.call('DEL', log)
      for i = 1, #all, 1000 do -- unpack takes a bounded number of values
        redis.call('RPUSH', log, unpack(all, i, math.min(i + 999, #all)))
      end
    end
    if redis.call('EXISTS', log) == 1 then
      redis.call('LTRIM', log, -max, -1)
      if expire then redis.call('PEXPIRE', log, window) end
    end
    return
  end
  local entries, kept, first = redis.call('LRANGE', log, 0, -1), 0, nil
  redis.call('DEL', log)
  for _, at in ipairs(entries) do
    if tonumber(at) > now - window then
      kept, first = kept + 1, first or tonumber(at)
    end
  end
  if kept > 0 and tonumber(redis.call('GET', counter) or '0') < kept then
    redis.call('SET', counter, math.min(kept, max), 'PX', first + window - now)
  end
  local ttl = redis.call('PTTL', counter)
  if ttl > window then redis.call('PEXPIRE', counter, window) end
end

-- Check one lane setting's value ("" = clear) before any write; EMQARG names it.
local function setting_arg(field, value)
  local kind = string.sub(field, 2)
  if (field ~= 'g' .. kind and field ~= 'd' .. kind)
      or (kind ~= 'limit' and kind ~= 'weight' and kind ~= 'rate' and kind ~= 'cap') then
    error({err = 'EMQARG field ' .. tostring(field) .. ': unknown lane setting'})
  end
  if value == '' then return end
  if kind == 'limit' then
    int_arg(value, 'ceiling', 1, 1000000)
  elseif kind == 'weight' then
    int_arg(value, 'weight', 1, 1000)
  elseif kind == 'cap' then
    int_arg(value, 'cap', 1, 1000000000)
  else
    rate_arg(value, 'rate')
  end
end

-- Lane g's rate may have changed: its window or log carries on under the rate now in force,
-- and a benched lane is judged again (rering benches it anew for the new wait).
local function lane_rate_moved(root, g, now)
  local max, window, smooth = lane_rate(root, g)
  local counter, log = lane_limiter_of(root, g), lane_claims_of(root, g)
  rate_moved(counter, log, max, window, smooth, now, true)
  redis.call('ZREM', root .. 'rdue', g)
end

-- Set lane g's own `field` (glimit, gweight, grate, gcap) to `value` ("" clears it: the lane
-- follows the default). Nothing happens when it holds that value already. Returns 1 changed,
-- else 0. A backlog cap is read by admission alone: it never moves a lane on or off the ring.
local function set_lane(root, g, field, value, now)
  local hash = root .. field
  if (redis.call('HGET', hash, g) or '') == value then return 0 end
  -- A ringed lane's weight moves between the ring-weight counters (ring_count in _ring.lua).
  local at = field == 'gweight' and ring_band(root, g)
  if at then ring_count(root, g, at, -1) end
  if value == '' then
    redis.call('HDEL', hash, g)
  else
    redis.call('HSET', hash, g, value)
  end
  if at then ring_count(root, g, at, 1) end
  if field == 'gcap' then return 1 end
  if field == 'grate' then lane_rate_moved(root, g, now) end
  rering(root, g, now)
  return 1
end

-- Whether lane g has its own setting of the kind the default `field` (dlimit, drate) sets.
local function has_own(root, g, field)
  if field == 'drate' then return redis.call('HEXISTS', root .. 'grate', g) == 1 end
  return redis.call('HEXISTS', root .. 'glimit', g) == 1
end

-- Set the queue's default for lanes (meta `dlimit`, `dweight`, `drate`, `dcap`); lanes without their
-- own setting follow it in the claim itself. Nothing happens when it holds that value already;
-- on a change, the lanes with work that follow it are judged again (ring membership, rate
-- state), once each. Returns 1 changed, else 0.
local function set_default(root, field, value, now)
  local meta = root .. 'meta'
  if (redis.call('HGET', meta, field) or '') == value then return 0 end
  if value == '' then
    redis.call('HDEL', meta, field)
  else
    redis.call('HSET', meta, field, value)
  end
  if field == 'dweight' or field == 'dcap' then return 1 end
  local seen = {}
  for _, list in ipairs({redis.call('SMEMBERS', root .. 'lanes'),
      redis.call('HKEYS', root .. 'gactive')}) do
    for _, g in ipairs(list) do
      if not seen[g] and not has_own(root, g, field) then
        seen[g] = true
        if field == 'drate' then lane_rate_moved(root, g, now) end
        rering(root, g, now)
      end
    end
  end
  return 1
end
