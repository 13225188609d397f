-- _settings.lua: lane and queue settings as every setter applies them (lane_limit, configure,
-- policy). Idempotent: a process applying its settings at start changes nothing when they are
-- in force already; a change carries the rate state on (rate_moved) instead of granting a
-- fresh budget. Libraries load in name order: this one builds on _lib.lua.

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
  -- A ringed lane's weight moves between the ring-weight counters (ring_count in _lib.lua).
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
