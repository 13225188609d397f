-- _lanes.lua: what a lane may serve now: its costs in units, its ceiling, its rate and its cool,
-- an ordered lane's holder; `serviceable` decides whether it belongs on a ring, `bench` parks one
-- until its window or cool ends. A library: each transition gets the helpers it calls
-- (engine/scripts.py).

-- The cost of the job lane g serves next (1 for an empty lane): its head, or in an ordered
-- queue its holder when that waits in the lane.
local function head_cost(root, g)
  local lane = lane_of(root, g)
  local next_id = redis.call('HGET', root .. 'holders', g)
  if not next_id or not redis.call('ZSCORE', lane, next_id) then
    next_id = redis.call('ZRANGE', lane, 0, 0)[1]
  end
  if not next_id then return 1 end
  return tonumber(redis.call('HGET', root .. 'job:' .. next_id, 'cost') or '1')
end

-- head_cost in a costed queue (meta `costed`), else 1 without reading the lane.
local function lane_head_cost(root, g)
  if redis.call('HEXISTS', root .. 'meta', 'costed') == 0 then return 1 end
  return head_cost(root, g)
end

-- ms until the lane's rate admits its next job (`cost` units: nil reads the head's), else 0.
local function lane_rate_wait(root, g, now, cost)
  local max, window, smooth = lane_rate(root, g)
  if not max then return 0 end
  local counter, log = lane_limiter_of(root, g), lane_claims_of(root, g)
  cost = cost or lane_head_cost(root, g)
  return rate_wait_for(counter, log, max, window, smooth, now or now_ms(), cost)
end

-- ms lane g is still cooling (lane.cool, a handler's Cool), else 0. `cooling` maps a lane to
-- the server ms its cool ends; an entry found past its end is dropped here, so only write
-- scripts call it (lanes.lua reads the hash itself).
local function lane_cool_wait(root, g, now)
  local at = redis.call('HGET', root .. 'cooling', g)
  if not at then return 0 end
  local left = tonumber(at) - (now or now_ms())
  if left > 0 then return left end
  redis.call('HDEL', root .. 'cooling', g)
  return 0
end

-- Ordered queues (meta `ordered`): `holders` maps a lane to the job that holds it, claimed and
-- not finished: leased, scheduled by a retry or a defer, or back in its lane after a reap. No
-- other job of the lane is claimed meanwhile. Returns the live holder of g, or nil. A holder
-- whose row left the lane for good (deleted, dead, completed, moved to another lane) is stale:
-- forgotten here, so a transition that ends a job without releasing it cannot block the lane.
local function holder(root, g)
  local h = redis.call('HGET', root .. 'holders', g)
  if not h then return nil end
  local fields = redis.call('HMGET', root .. 'job:' .. h, 'state', 'group')
  local state = fields[1]
  if (fields[2] or '_') == g and (state == 'active' or state == 'scheduled'
      or state == 'pending') then
    return h
  end
  redis.call('HDEL', root .. 'holders', g)
  return nil
end

-- Serviceable = lane non-empty, not paused, not cooling, under its ceiling, under its rate
-- budget, and (in an ordered queue) not held by a job out of the lane; on a shard of a sharded
-- queue, not on the move (docs/concepts/shards.md, "Moving a lane"): neither frozen on its
-- source (`moved` names it) nor held on its target (`adopted` names its source until the
-- release; lane_adopt.lua writes it in `moved` too, so one HEXISTS reads both). The ring holds
-- exactly these groups. In units (a costed queue): the job it serves next fits both budgets, or
-- passes alone (nothing of the lane in flight; an untouched window, see rate_wait_for).
local function serviceable(root, g)
  if redis.call('ZCARD', lane_of(root, g)) == 0 then return false end
  local h = holder(root, g)
  if h and not redis.call('ZSCORE', lane_of(root, g), h) then return false end
  if redis.call('SISMEMBER', root .. 'paused', g) == 1 then return false end
  if redis.call('HEXISTS', root .. 'moved', g) == 1 then return false end
  if lane_cool_wait(root, g) > 0 then return false end
  local limit, cost = lane_ceiling(root, g), nil
  if limit then
    local units = lane_units(root, g)
    if units >= limit then return false end
    if units > 0 then
      cost = lane_head_cost(root, g)
      if units + cost > limit then return false end
    end
  end
  return lane_rate_wait(root, g, nil, cost) == 0
end

-- Bench a lane whose rate budget is spent until its window ends, or that cools until its cool
-- ends, whichever is later (promote, and the claim, bring it back at that score). A cooling
-- lane stays in `rdue` until its cool ends, with work or without (cool.lua puts it there):
-- nothing else brings it back, and every path that takes it out benches it again.
local function bench(root, g, now)
  local wait = math.max(lane_rate_wait(root, g, now), lane_cool_wait(root, g, now))
  if wait > 0 then redis.call('ZADD', root .. 'rdue', now + wait, g) end
end
