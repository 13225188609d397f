-- _claim_lane.lua: what the claim (claim.lua) knows of each lane its walk visits, read once per
-- call: its settings, in-flight count, depth, credit and rate room (a batch over few lanes
-- visits each several times). `c` is the claim's state (claim.lua). A library: each
-- transition gets the helpers it calls (engine/scripts.py).

-- Lane g as claim c knows it: limit (its ceiling, nil for none), rmax, rwindow, smooth (its
-- rate), weight and own (its weight, own = its `gweight` field or nil), depth (jobs in its
-- lane), active (units in flight, with a ceiling), room (its rate's room, exact up to want + 1
-- unless `whole`), credit and estimate (fairness by work), and what this call leased of it
-- (`leased` jobs, `extra` units above 1 a job: written at the call's end).
local function claim_lane(root, c, g)
  local l = c.lanes[g]
  if l then return l end
  local cfg = c.cfg
  local limit = redis.call('HGET', root .. 'glimit', g) or cfg[8]
  local rmax, rwindow, smooth = lane_rate(root, g, cfg[7])
  local own = redis.call('HGET', root .. 'gweight', g)
  l = {limit = limit and tonumber(limit), rmax = rmax, rwindow = rwindow, smooth = smooth,
    leased = 0, extra = 0, depth = redis.call('ZCARD', lane_of(root, g)), own = own,
    weight = tonumber(own or cfg[9] or '1')}
  local fair = c.fair
  if fair then
    -- Its credit (a lane new to the ring starts with a visit's grant) and, by time, its jobs'
    -- estimated run time in ms.
    l.credit = tonumber(redis.call('HGET', root .. 'gdeficit', g) or c.quantum * l.weight)
    if fair == 'time' then l.estimate = run_estimate(root, g, c.quantum) end
  end
  if l.limit then
    -- In flight, in units (jobs in a queue without costs).
    l.active = c.costed and lane_units(root, g)
      or tonumber(redis.call('HGET', root .. 'gactive', g) or '0')
  end
  if rmax then
    local counter, log = lane_limiter_of(root, g), lane_claims_of(root, g)
    l.room, l.whole = rate_room(counter, log, rmax, rwindow, smooth, c.now, c.want), not smooth
  end
  c.lanes[g] = l
  return l
end

-- Lane l's rate room, read whole (exact) when its sliding log was read only up to want + 1.
local function whole_room(root, l, g, now)
  if l.whole then return end
  l.whole = true
  l.room = rate_room(lane_limiter_of(root, g), lane_claims_of(root, g), l.rmax, l.rwindow,
    true, now, l.rmax)
end
