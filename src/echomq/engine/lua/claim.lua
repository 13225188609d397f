-- claim.lua: lease the head jobs of the lanes whose turn it is (fair lanes, weighted rotation).
-- KEYS[1] root   `emq:{q}:`
-- ARGV[1] lease  ms the lease lasts (server clock), 1..86 400 000
-- ARGV[2] want   most jobs to claim, 1..1000 (1 = claim; > 1 = claim_batch)
-- ARGV[3] one    "1": a batch of one lane (the head lane whose turn it is gives up to `want`
--                jobs, clamped to its ceiling, rate and the queue's, as one claim of its turn;
--                the walk stops there); absent or "0": the walk below
-- ARGV[4] load   "1": a sharded queue's claim, whose reply on success ends with the shard's
--                load (append_load in _load.lua); absent: a plain queue's, as before (on a
--                shard, meta `shard` set, refused EMQSHARDED: unfenced in _shard.lua)
-- Returns {deadline_ms, more, id1, payload1, attempts1, group1, id2, …} on success, where
--         more = 1 while some lane is still on the ring (0 saves the caller an empty claim);
--         with ARGV[4], then band, weight, due: the most urgent band with a ringed lane (-1:
--         none), its active weight W_s, the first rate-benched lane's return (ms; -1: none);
--         nil when nothing is claimable (queue paused, at its concurrency ceiling, a shard
--         holding no quota, no lane);
--         a positive integer n: the queue's rate window is spent, try again in n ms;
--         a negative integer -n: nothing claimable now, a rate-limited lane returns in n ms.
-- Gates, in order: queue paused or a shard with no quota (meta `noquota`: a quota of 0 is
-- not "no limit", see quota.lua), queue concurrency, queue rate (its fixed window or sliding
-- log: rate_room in _rates.lua), then the ring. Before the
-- ring is read, benched lanes whose rate window has ended rejoin it (as promote does): a
-- consumer kept busy by other lanes runs no upkeep, and would otherwise serve them late.
-- The ring holds exactly the serviceable lanes, so its head can serve at once. The head is
-- served up to its weight in consecutive claims (`turn` counts them), then the ring rotates one
-- step; a lane that stops being serviceable leaves the ring. A batch walks the ring the same
-- way on one lease: from each head lane it takes what is left of that lane's turn, clamped to
-- every headroom (lane ceiling, lane rate, queue ceiling and rate), then moves on, so it never
-- pushes gactive past glimit and leases exactly the jobs a run of single claims would. A lane
-- alone on the ring starts its next turn at once: it serves the rest of the batch.
-- An ordered queue (meta `ordered`) serves one job per lane visit, its holder or its oldest
-- (pop_ordered in _lane_jobs.lua), and the lane leaves the ring until that job finishes.
-- Priority bands (a banded queue, see _ring.lua): each band has its own ring and turn; the walk
-- serves the most urgent band's ring first, then the next band's, on the same lease. A lane
-- serves only the jobs of its ring's band; when its next head is in another band, it moves to
-- the tail of that band's ring (which this walk visits in turn).
-- Costs (a costed queue, see _lanes.lua): rates and lane ceilings count units. Before a lane
-- with a budget (its ceiling or rate, or the queue's rate) pops, its next heads' costs are
-- peeked; it takes those that fit every budget left. A head that does not fit waits: for the
-- queue's rate the walk ends (the queue's wait is answered when nothing was claimed); for the
-- lane's rate the lane is benched until enough units return; for its ceiling it leaves the
-- ring until a release rings it again. A head dearer than a whole budget passes alone when that
-- budget is untouched (an empty window, nothing in flight), so it never blocks its lane.
-- Fairness by work (meta `fair` = cost or time, see _fair.lua): a lane's turn is its credit
-- (`gdeficit`), not a count of claims. A lane at the head with credit > 0 serves heads while
-- its credit lasts, each charged its cost (`cost`) or its lane's run-time estimate in ms
-- (`time`; every end of the lease settles the estimate against the measured run time); the
-- last may overdraw it. A lane whose credit is spent gets quantum x weight and goes to the
-- tail (a dry visit when it had nothing to serve with). A lane new to the ring starts with
-- quantum x weight; one that empties forgets its credit. At most DRY dry visits per call:
-- after them the head serves in debt, so a call always ends.
-- Each call counts its claims for the measured rates ETAs read (count_claims in _served.lua):
-- the queue's and each served lane's.
local root = KEYS[1]
local lease = int_arg(ARGV[1], 'lease', 1, 86400000)
local want = int_arg(ARGV[2], 'n', 1, 1000)
local one_lane = ARGV[3] == '1'
local with_load = ARGV[4] == '1'
local active = root .. 'active'

local cfg = redis.call('HMGET', root .. 'meta', 'paused', 'concurrency', 'max', 'window',
  'ordered', 'mode', 'drate', 'dlimit', 'dweight', 'banded', 'bands', 'costed', 'fair',
  'quantum', 'noquota', 'shard')
-- A shard claimed without ARGV[4] (a plain queue on a sharded queue's name) would serve this
-- shard alone, outside the workers' stride: refused, before any write.
if cfg[16] and not with_load then return redis.error_reply(unfenced(root, cfg[16])) end
if cfg[1] or cfg[15] then return nil end
local ceiling = tonumber(cfg[2] or '0')
if ceiling > 0 then
  local room = ceiling - redis.call('ZCARD', active)
  if room <= 0 then return nil end
  if want > room then want = room end
end

-- The bands to walk, most urgent first: the default band alone in a queue never banded.
local banded = cfg[10] ~= false
local bands, listed = {5}, {[5] = true}
if banded then bands, listed = bands_in_use(cfg[11]) end

local now = now_ms()
local qmax, qwindow = tonumber(cfg[3] or '0'), tonumber(cfg[4] or '0')
local limiter, qlog = root .. 'limiter', root .. 'claims'
local qsmooth = cfg[6] == 'smooth'
-- A costed queue counts rates in units. A sliding log's room is read up to `want` + 1 (what a
-- queue without costs needs); a head that does not fit that reads it whole, once (`whole`).
local costed = cfg[12] ~= false
local qroom, qunits, qcost, qwhole = nil, 0, nil, not qsmooth
if qmax > 0 then
  local room = rate_room(limiter, qlog, qmax, qwindow, qsmooth, now, want)
  if room <= 0 then
    if not any_ringed(root, bands) then return nil end
    return math.max(1, rate_wait(limiter, qlog, qmax, qwindow, qsmooth, now))
  end
  if want > room then want = room end
  qroom = room
end

local rdue = root .. 'rdue'
for _, due in ipairs(redis.call('ZRANGE', rdue, '-inf', now, 'BYSCORE', 'LIMIT', 0, 16)) do
  redis.call('ZREM', rdue, due)
  rering(root, due, now)
end
-- Nothing claimable: when a benched lane returns (-ms), or nil.
local function nothing()
  local due = redis.call('ZRANGE', rdue, 0, 0, 'WITHSCORES')
  if due[2] then return -math.max(1, tonumber(due[2]) - now) end
  return nil
end

local ordered = cfg[5] ~= false
-- Fairness by work: the quantum (units, or ms of run time) a visit grants per unit of weight.
local fair = cfg[13]
local quantum, dry = fair and fair_quantum(fair, cfg[14], cfg[12]), 0
local deficit = root .. 'gdeficit'
local deadline = now + lease
local out = {deadline, 1}
-- What the walk knows of each lane it visits, read once per call: settings, in-flight count
-- and depth (a batch over few lanes visits each several times). `leased` is written at the end.
local lanes, left, taken = {}, false, 0

local function lane(g)
  local l = lanes[g]
  if l then return l end
  local limit = redis.call('HGET', root .. 'glimit', g) or cfg[8]
  local rmax, rwindow, smooth = lane_rate(root, g, cfg[7])
  local own = redis.call('HGET', root .. 'gweight', g)
  l = {limit = limit and tonumber(limit), rmax = rmax, rwindow = rwindow, smooth = smooth,
    leased = 0, extra = 0, depth = redis.call('ZCARD', lane_of(root, g)), own = own,
    weight = tonumber(own or cfg[9] or '1')}
  if fair then
    -- Its credit (a lane new to the ring starts with a visit's grant) and, by time, its jobs'
    -- estimated run time in ms.
    l.credit = tonumber(redis.call('HGET', deficit, g) or quantum * l.weight)
    if fair == 'time' then l.estimate = run_estimate(root, g, quantum) end
  end
  if l.limit then
    -- In flight, in units (jobs in a queue without costs).
    l.active = costed and lane_units(root, g)
      or tonumber(redis.call('HGET', root .. 'gactive', g) or '0')
  end
  if rmax then
    local counter, log = lane_limiter_of(root, g), lane_claims_of(root, g)
    l.room, l.whole = rate_room(counter, log, rmax, rwindow, smooth, now, want), not smooth
  end
  lanes[g] = l
  return l
end

-- Serve band `band`'s ring (its key `ring`, its turn `turn`) until the claim is full or the
-- ring is empty. Returns true while the ring holds a lane.
local function walk(ring, turn, band)
  local ringlen
  local function off_ring(g)
    redis.call('LPOP', ring)
    ring_count(root, g, band, -1, lanes[g].own)
    redis.call('DEL', turn)
    if band ~= 5 then redis.call('HDEL', root .. 'gband', g) end
    if ringlen then ringlen = ringlen - 1 end
    left = true
  end

  -- g (at the head of this band's ring) moves to band p's ring, which this walk visits in turn.
  local function move_band(g, p)
    off_ring(g)
    ring_join(root, g, p)
    if listed[p] then return end
    listed[p] = true
    local at = #bands + 1
    while at > 1 and bands[at - 1] < p do at = at - 1 end
    table.insert(bands, at, p)
  end

  -- Lane l's rate room, read whole (exact) when its sliding log was read only up to want + 1.
  local function whole_room(l, g)
    if l.whole then return end
    l.whole = true
    l.room = rate_room(lane_limiter_of(root, g), lane_claims_of(root, g), l.rmax, l.rwindow,
      true, now, l.rmax)
  end

  -- One turn of the head lane g: lease up to `room` of its heads. Returns how many it leased
  -- (0: it could not serve, and left the ring).
  local function serve(g, room)
    local l = lane(g)
    -- By work: a lane on a shared ring whose credit is spent gets its grant and waits for its
    -- next visit (a dry visit; after DRY of them in one call the head serves in debt).
    local alone = false
    if fair then
      ringlen = ringlen or redis.call('LLEN', ring)
      alone = ringlen == 1
      if l.credit <= 0 and not alone and dry < 64 then -- DRY
        dry = dry + 1
        l.credit = l.credit + quantum * l.weight
        redis.call('HSET', deficit, g, l.credit)
        redis.call('LMOVE', ring, ring, 'LEFT', 'RIGHT')
        return 0
      end
    end
    local take = math.min(room, l.depth)
    if l.limit then take = math.min(take, l.limit - l.active) end
    if l.rmax then take = math.min(take, l.room) end
    -- A banded lane serves only the jobs of this band (those scored up to the band's score).
    local inband = take
    if banded and take > 0 then
      inband = redis.call('ZCOUNT', lane_of(root, g), '-inf', 5 - band)
      if inband == 0 then
        -- Defensive (a lane sits on its head job's band): it moves to that band.
        move_band(g, head_band(root, g))
        return 0
      end
      take = math.min(take, inband)
    end
    -- The lane's turn: `weight` claims per visit, `served` of them spent already; while other
    -- lanes wait, it takes at most what is left (a stale count still serves one).
    local served = 0
    if fair then
      -- By work, the turn lasts while the credit does (a lane alone serves on: nobody waits).
      if alone then
        l.credit = quantum * l.weight
      elseif fair == 'time' then
        take = math.min(take, math.max(1, math.ceil(l.credit / l.estimate)))
      elseif not costed then
        take = math.min(take, math.max(1, l.credit)) -- every job costs 1
      end
    else
      if l.weight > 1 then
        local seen = redis.call('HMGET', turn, 'group', 'served')
        if seen[1] == g then served = tonumber(seen[2]) end
      end
      if take > 1 and not one_lane then
        ringlen = ringlen or redis.call('LLEN', ring)
        if ringlen > 1 then take = math.min(take, math.max(1, l.weight - served)) end
      end
    end
    -- By cost in a costed queue, the heads are peeked: those the credit covers (the last may
    -- overdraw it).
    local by_cost = fair == 'cost' and costed and not alone
    -- A costed queue with a budget to spend: the heads that fit every budget left, in units.
    local units
    if costed and take > 0 and (l.limit or l.rmax or qroom or by_cost) then
      local ids
      if ordered then
        ids = {holder(root, g) or redis.call('ZRANGE', lane_of(root, g), 0, 0)[1]}
      else
        ids = redis.call('ZRANGE', lane_of(root, g), 0, take - 1)
      end
      local fit, blocked, first = 0, nil, 1
      units = 0
      for i, id in ipairs(ids) do
        local c = tonumber(redis.call('HGET', root .. 'job:' .. id, 'cost') or '1')
        local u, alone = units + c, i == 1
        if i == 1 then first = c end
        if qroom and u > qroom and not qwhole then
          -- Units spent in this call are not in the log yet: the whole read less them.
          qwhole = true
          qroom = rate_room(limiter, qlog, qmax, qwindow, true, now, qmax) - qunits
        end
        if l.rmax and u > l.room then whole_room(l, g) end
        if qroom and u > qroom and not (alone and qroom >= qmax) then
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
      if fit == 0 then
        if blocked == 'queue' then
          qcost, want = first, taken -- the queue's budget is short: the walk ends here
        else
          off_ring(g)
          if blocked == 'rate' then
            local wait = rate_wait_for(lane_limiter_of(root, g), lane_claims_of(root, g), l.rmax,
              l.rwindow, l.smooth, now, first)
            redis.call('ZADD', rdue, now + math.max(1, wait), g)
          end -- the ceiling: a release rings it again (detach in _settle.lua)
        end
        return 0
      end
      take = fit
    end
    local heads = {}
    if take > 0 and ordered then
      heads = pop_ordered(root, g)
    elseif take > 0 then
      heads = redis.call('ZPOPMIN', lane_of(root, g), take)
    end
    local n = #heads / 2
    if n == 0 then
      -- Defensive: a lane that cannot serve never stays on the ring.
      off_ring(g)
      bench(root, g, now)
      return 0
    end
    -- A costed queue counts every lease's units (gextra), with a budget to spend or not.
    local count_units = costed and not units
    if count_units then units = 0 end
    -- Per job one read and one write (the token is the row's attempts + 1); one ZADD a turn.
    -- By time, each lease records what it was charged and when (charge_time, at its settle).
    local charged = fair == 'time' and not alone and (l.estimate .. ':' .. now)
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
    redis.call('ZADD', active, unpack(leased))
    units = units or n
    l.depth, l.leased, l.extra = l.depth - n, l.leased + n, l.extra + units - n
    local turn_over = false
    if fair and l.depth == 0 then
      forget_share(root, g) -- an emptied lane starts afresh when it returns
    elseif fair then
      -- Charged its units or its estimated run time; a spent credit gets the next visit's grant
      -- as the turn ends.
      if not alone then l.credit = l.credit - (fair == 'time' and n * l.estimate or units) end
      if l.credit <= 0 then
        l.credit, turn_over = l.credit + quantum * l.weight, true
      end
      redis.call('HSET', deficit, g, l.credit)
    end
    if one_lane then want = 0 end -- one lane's batch: the walk ends with this lane
    local spent = one_lane and 1 or n -- a one-lane batch is one claim of the lane's turn
    if l.limit then l.active = l.active + units end
    if qroom then qroom, qunits = qroom - units, qunits + units end
    local spent_budget = false
    if l.rmax then
      -- Spent now, not at the end: bench() reads the window.
      local counter, log = lane_limiter_of(root, g), lane_claims_of(root, g)
      rate_spend(counter, log, l.rmax, l.rwindow, l.smooth, now, units, true)
      l.room = l.room - units
      if l.room <= 0 and costed then whole_room(l, g) end -- spent for sure, or room left
      spent_budget = l.room <= 0
    end
    local full = l.limit and l.active >= l.limit
    if costed and l.depth > 0 and not ordered and (l.limit or l.rmax) then
      -- In units, the lane stays serviceable only if its next head fits (serviceable).
      local c = head_cost(root, g)
      full = full or (l.limit and l.active + c > l.limit)
      if l.rmax and not spent_budget and c > l.room then
        whole_room(l, g)
        spent_budget = c > l.room and l.room < l.rmax
      end
    end
    if l.depth == 0 then redis.call('SREM', root .. 'lanes', g) end
    if ordered or l.depth == 0 or spent_budget or full then
      -- No longer serviceable (an ordered lane is held now): off the ring; a spent rate budget
      -- is benched until its window ends.
      off_ring(g)
      if spent_budget and l.depth > 0 then bench(root, g, now) end
    elseif banded and n == inband then
      -- Its jobs of this band are served: it goes on in its next head's band.
      move_band(g, head_band(root, g))
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

  -- Each turn leases at least one job, takes a lane off the ring or is one of DRY dry visits
  -- (by work), so the walk ends.
  while taken < want do
    local g = redis.call('LINDEX', ring, 0)
    if not g then return false end
    taken = taken + serve(g, want - taken)
  end
  return true
end

local at = 1
while taken < want and at <= #bands do
  local band = bands[at]
  if band == 5 then
    walk(root .. 'ring', root .. 'turn', band)
  elseif not walk(root .. 'band:' .. band .. ':ring', root .. 'band:' .. band .. ':turn', band) then
    -- Its ring is empty: it leaves meta `bands` (read again: this walk may have added one).
    local left_bands = string.gsub(redis.call('HGET', root .. 'meta', 'bands') or '', band, '')
    if left_bands == '' then
      redis.call('HDEL', root .. 'meta', 'bands')
    else
      redis.call('HSET', root .. 'meta', 'bands', left_bands)
    end
  end
  at = at + 1
end
if taken == 0 then
  if qcost then
    return math.max(1, rate_wait_for(limiter, qlog, qmax, qwindow, qsmooth, now, qcost))
  end
  return nothing()
end
for g, l in pairs(lanes) do
  if l.leased > 0 then
    redis.call('HINCRBY', root .. 'gactive', g, l.leased)
    if l.extra > 0 then redis.call('HINCRBY', root .. 'gextra', g, l.extra) end
    redis.call('HINCRBY', root .. 'served', g, l.leased) -- for ETAs: count_claims
  end
end
if qmax > 0 then rate_spend(limiter, qlog, qmax, qwindow, qsmooth, now, qunits) end
count_claims(root, now, taken)
if left and not any_ringed(root, bands) then out[2] = 0 end
if with_load then append_load(root, out, cfg[9]) end
return out
