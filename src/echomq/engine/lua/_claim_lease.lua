-- _claim_lease.lua: the claim leasing a lane's heads (claim.lua): the rows it writes, the
-- leases it adds to `active`, its reply, and the budgets the turn spends. `c` is the claim's
-- state (claim.lua), `l` what it knows of the lane (claim_lane). A library: each transition
-- gets the helpers it calls (engine/scripts.py).

-- Lease up to `take` heads of lane g (an ordered lane's one: pop_ordered) until c.deadline;
-- `units` their units when a costed queue peeked them, else nil (counted here in a costed
-- queue). Per job one read and one write (the token is the row's attempts + 1), one ZADD in
-- all; by time, each lease records what it was charged and when (charge_time, at its settle).
-- Returns how many it leased (0: the lane had none to give) and their units.
local function lease_heads(root, c, l, g, take, units, alone)
  local heads = {}
  if take > 0 and c.ordered then
    heads = pop_ordered(root, g)
  elseif take > 0 then
    heads = redis.call('ZPOPMIN', lane_of(root, g), take)
  end
  local n = #heads / 2
  if n == 0 then return 0, 0 end
  -- A costed queue counts every lease's units (gextra), with a budget to spend or not.
  local count_units = c.costed and not units
  if count_units then units = 0 end
  local charged = c.fair == 'time' and not alone and (l.estimate .. ':' .. c.now)
  local out, deadline = c.out, c.deadline
  local leased, o = {}, #out
  for i = 1, #heads, 2 do
    local id = heads[i]
    local row = root .. 'job:' .. id
    local fields = count_units and redis.call('HMGET', row, 'payload', 'attempts', 'cost')
      or redis.call('HMGET', row, 'payload', 'attempts')
    local token = tonumber(fields[2] or '0') + 1
    if charged then
      redis.call('HSET', row, 'state', 'active', 'attempts', token, 'charged', charged)
    else
      redis.call('HSET', row, 'state', 'active', 'attempts', token)
    end
    if count_units then units = units + tonumber(fields[3] or '1') end
    out[o + 1], out[o + 2], out[o + 3], out[o + 4], o = id, fields[1], token, g, o + 4
    leased[i], leased[i + 1] = deadline, id
  end
  redis.call('ZADD', root .. 'active', unpack(leased))
  units = units or n
  l.depth, l.leased, l.extra = l.depth - n, l.leased + n, l.extra + units - n
  return n, units
end

-- The budgets lane g's turn spent, in units: its ceiling's (in flight), the queue's rate
-- (counted here, spent at the call's end) and the lane's rate (spent now, not at the end:
-- bench reads the window). Returns true when the lane's rate budget is spent.
local function spend_turn(root, c, l, g, units)
  if l.limit then l.active = l.active + units end
  if c.qroom then c.qroom, c.qunits = c.qroom - units, c.qunits + units end
  if not l.rmax then return false end
  rate_spend(lane_limiter_of(root, g), lane_claims_of(root, g), l.rmax, l.rwindow, l.smooth,
    c.now, units, true)
  l.room = l.room - units
  -- In units, spent for sure, or room left.
  if l.room <= 0 and c.costed then whole_room(root, l, g, c.now) end
  return l.room <= 0
end
