-- _claim_fair.lua: fairness by work (_fair.lua) in the claim's turn (_claim_turn.lua): a lane's
-- turn is its credit (`gdeficit`), not a count of claims; each head it serves is charged its
-- cost or its lane's run-time estimate. `c` is the claim's state (claim.lua), `l` what it
-- knows of the lane (claim_lane). A library: each transition gets the helpers it calls
-- (engine/scripts.py).

-- A visit of lane g at the head of `ring`: whether it is alone there (it serves on: nobody
-- waits), and whether the visit is dry: a lane on a shared ring whose credit is spent gets its
-- grant and goes to the tail (after DRY dry visits in one call the head serves in debt).
local function fair_visit(root, c, ring, l, g)
  c.ringlen = c.ringlen or redis.call('LLEN', ring)
  local alone = c.ringlen == 1
  if l.credit <= 0 and not alone and c.dry < 64 then -- DRY
    c.dry = c.dry + 1
    l.credit = l.credit + c.quantum * l.weight
    redis.call('HSET', root .. 'gdeficit', g, l.credit)
    redis.call('LMOVE', ring, ring, 'LEFT', 'RIGHT')
    return alone, true
  end
  return alone, false
end

-- The turn's `take`, clamped to what the credit covers: by time, the heads its estimate
-- allows; by cost without costs, one unit a job (a costed queue peeks the heads' costs:
-- fitting_heads). A lane alone serves on, its credit a fresh grant.
local function fair_take(c, l, take, alone)
  if alone then
    l.credit = c.quantum * l.weight
  elseif c.fair == 'time' then
    take = math.min(take, math.max(1, math.ceil(l.credit / l.estimate)))
  elseif not c.costed then
    take = math.min(take, math.max(1, l.credit)) -- every job costs 1
  end
  return take
end

-- Lane g leased n heads of `units`: charged its units or its estimated run time (the last may
-- overdraw its credit). Returns true when the turn is over: its credit is spent, and it gets
-- the next visit's grant. An emptied lane starts afresh when it returns.
local function fair_charge(root, c, l, g, n, units, alone)
  if l.depth == 0 then
    forget_share(root, g)
    return false
  end
  if not alone then l.credit = l.credit - (c.fair == 'time' and n * l.estimate or units) end
  local turn_over = false
  if l.credit <= 0 then
    l.credit, turn_over = l.credit + c.quantum * l.weight, true
  end
  redis.call('HSET', root .. 'gdeficit', g, l.credit)
  return turn_over
end
