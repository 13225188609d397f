-- _claim_costs.lua: the claim's turn in a costed queue (meta `costed`, see _lanes.lua): rates
-- and lane ceilings count units, so before a lane with a budget pops, its next heads' costs are
-- peeked and it takes those that fit every budget left. `c` is the claim's state (claim.lua),
-- `l` what it knows of the lane (claim_lane). A library: each transition gets the helpers it
-- calls (engine/scripts.py).

-- Of lane g's next `take` heads (an ordered lane's one: its holder or its oldest), those whose
-- costs fit every budget left: the queue's rate, the lane's ceiling and rate. A head dearer
-- than a whole budget passes alone when that budget is untouched (an empty window, nothing in
-- flight). `by_cost` (fairness by cost): the heads the credit covers, the last may overdraw
-- it. Returns how many fit, their units, what blocked the next ('queue', 'ceiling', 'rate' or
-- nil) and the first head's cost.
local function fitting_heads(root, c, l, g, take, by_cost)
  local ids
  if c.ordered then
    ids = {holder(root, g) or redis.call('ZRANGE', lane_of(root, g), 0, 0)[1]}
  else
    ids = redis.call('ZRANGE', lane_of(root, g), 0, take - 1)
  end
  local fit, units, blocked, first = 0, 0, nil, 1
  for i, id in ipairs(ids) do
    local cost = tonumber(redis.call('HGET', root .. 'job:' .. id, 'cost') or '1')
    local u, alone = units + cost, i == 1
    if i == 1 then first = cost end
    if c.qroom and u > c.qroom and not c.qwhole then
      -- Units spent in this call are not in the log yet: the whole read less them.
      c.qwhole = true
      c.qroom = rate_room(root .. 'limiter', root .. 'claims', c.qmax, c.qwindow, true, c.now,
        c.qmax) - c.qunits
    end
    if l.rmax and u > l.room then whole_room(root, l, g, c.now) end
    local qroom = c.qroom
    if qroom and u > qroom and not (alone and qroom >= c.qmax) then
      blocked = 'queue'
    elseif l.limit and u > l.limit - l.active and not (alone and l.active == 0) then
      blocked = 'ceiling'
    elseif l.rmax and u > l.room and not (alone and l.room >= l.rmax) then
      blocked = 'rate'
    end
    if blocked then break end
    fit, units = i, u
    if by_cost and u >= l.credit then break end
  end
  return fit, units, blocked, first
end

-- After a costed lane's turn, with jobs left: it stays serviceable only if its next head fits
-- (serviceable in _lanes.lua). Returns `full` (its ceiling's room is short) and `spent` (its
-- rate's is), given those the turn found.
local function next_head_blocked(root, c, l, g, full, spent)
  local cost = head_cost(root, g)
  full = full or (l.limit and l.active + cost > l.limit)
  if l.rmax and not spent and cost > l.room then
    whole_room(root, l, g, c.now)
    spent = cost > l.room and l.room < l.rmax
  end
  return full, spent
end
