-- _claim_turn.lua: one turn of the lane at the head of a band's ring in the claim's walk
-- (_claim_walk.lua): how many heads it may take (its depth, ceiling, rate and band, then its
-- turn: `weight` claims, or its credit by work), leasing them, and where the lane goes after.
-- `c` is the claim's state (claim.lua). A library: each transition gets the helpers it calls
-- (engine/scripts.py).

-- One turn of lane g, at the head of band `band`'s ring (its key `ring`, its turn `turn`):
-- lease up to `room` of its heads. Returns how many it leased (0: it could not serve, and left
-- the ring, or had a dry visit).
local function serve_turn(root, c, ring, turn, band, g, room)
  local l = claim_lane(root, c, g)
  local fair, costed, now = c.fair, c.costed, c.now
  local alone = false
  if fair then
    local dry
    alone, dry = fair_visit(root, c, ring, l, g)
    if dry then return 0 end
  end
  local take = math.min(room, l.depth)
  if l.limit then take = math.min(take, l.limit - l.active) end
  if l.rmax then take = math.min(take, l.room) end
  -- A banded lane serves only the jobs of this band (those scored up to the band's score).
  local inband = take
  if c.banded and take > 0 then
    inband = redis.call('ZCOUNT', lane_of(root, g), '-inf', 5 - band)
    if inband == 0 then
      -- Defensive (a lane sits on its head job's band): it moves to that band.
      move_band(root, c, ring, turn, band, g, head_band(root, g))
      return 0
    end
    take = math.min(take, inband)
  end
  -- The lane's turn: `weight` claims per visit, `served` of them spent already; while other
  -- lanes wait, it takes at most what is left (a stale count still serves one).
  local served = 0
  if fair then
    take = fair_take(c, l, take, alone)
  else
    if l.weight > 1 then
      local seen = redis.call('HMGET', turn, 'group', 'served')
      if seen[1] == g then served = tonumber(seen[2]) end
    end
    if take > 1 and not c.one_lane then
      c.ringlen = c.ringlen or redis.call('LLEN', ring)
      if c.ringlen > 1 then take = math.min(take, math.max(1, l.weight - served)) end
    end
  end
  -- A costed queue with a budget to spend (by cost, the credit too): the heads that fit.
  local by_cost = fair == 'cost' and costed and not alone
  local units
  if costed and take > 0 and (l.limit or l.rmax or c.qroom or by_cost) then
    local fit, blocked, first
    fit, units, blocked, first = fitting_heads(root, c, l, g, take, by_cost)
    if fit == 0 then
      if blocked == 'queue' then
        c.qcost, c.want = first, c.taken -- the queue's budget is short: the walk ends here
      else
        off_ring(root, c, ring, turn, band, g)
        if blocked == 'rate' then
          local wait = rate_wait_for(lane_limiter_of(root, g), lane_claims_of(root, g), l.rmax,
            l.rwindow, l.smooth, now, first)
          redis.call('ZADD', root .. 'rdue', now + math.max(1, wait), g)
        end -- the ceiling: a release rings it again (detach in _settle.lua)
      end
      return 0
    end
    take = fit
  end
  local n
  n, units = lease_heads(root, c, l, g, take, units, alone)
  if n == 0 then
    -- Defensive: a lane that cannot serve never stays on the ring.
    off_ring(root, c, ring, turn, band, g)
    bench(root, g, now)
    return 0
  end
  local turn_over = fair and fair_charge(root, c, l, g, n, units, alone)
  if c.one_lane then c.want = 0 end -- one lane's batch: the walk ends with this lane
  local spent = c.one_lane and 1 or n -- a one-lane batch is one claim of the lane's turn
  local spent_budget = spend_turn(root, c, l, g, units)
  local full = l.limit and l.active >= l.limit
  if costed and l.depth > 0 and not c.ordered and (l.limit or l.rmax) then
    full, spent_budget = next_head_blocked(root, c, l, g, full, spent_budget)
  end
  if l.depth == 0 then redis.call('SREM', root .. 'lanes', g) end
  if c.ordered or l.depth == 0 or spent_budget or full then
    -- No longer serviceable (an ordered lane is held now): off the ring; a spent rate budget
    -- is benched until its window ends.
    off_ring(root, c, ring, turn, band, g)
    if spent_budget and l.depth > 0 then bench(root, g, now) end
  elseif c.banded and n == inband then
    -- Its jobs of this band are served: it goes on in its next head's band.
    move_band(root, c, ring, turn, band, g, head_band(root, g))
  elseif fair and not turn_over then
    -- Credit left (the batch is full): it stays at the head.
  elseif not fair and l.weight > 1 and served + spent < l.weight then
    -- Its turn goes on (the batch is full): it stays at the head.
    redis.call('HSET', turn, 'group', g, 'served', served + spent)
  else
    if l.weight > 1 and not fair then redis.call('DEL', turn) end
    redis.call('LMOVE', ring, ring, 'LEFT', 'RIGHT')
  end
  return n
end
