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
-- The walk lives in libraries, by concept: _claim_walk.lua (the bands' rings), _claim_turn.lua
-- (a lane's turn), _claim_lane.lua (what the claim knows of a lane), _claim_costs.lua (a costed
-- queue's heads), _claim_fair.lua (fairness by work) and _claim_lease.lua (the leases written).
local root = KEYS[1]
local lease = int_arg(ARGV[1], 'lease', 1, 86400000)
local want = int_arg(ARGV[2], 'n', 1, 1000)
local with_load = ARGV[4] == '1'

local cfg = redis.call('HMGET', root .. 'meta', 'paused', 'concurrency', 'max', 'window',
  'ordered', 'mode', 'drate', 'dlimit', 'dweight', 'banded', 'bands', 'costed', 'fair',
  'quantum', 'noquota', 'shard')
-- A shard claimed without ARGV[4] (a plain queue on a sharded queue's name) would serve this
-- shard alone, outside the workers' stride: refused, before any write.
if cfg[16] and not with_load then return redis.error_reply(unfenced(root, cfg[16])) end
if cfg[1] or cfg[15] then return nil end
local ceiling = tonumber(cfg[2] or '0')
if ceiling > 0 then
  local room = ceiling - redis.call('ZCARD', root .. 'active')
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
local qroom
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

-- The claim's state, shared with the walk's helpers (_claim_*.lua): the settings it read,
-- `want` (it may end the walk early), what it has `taken` and leased (`out`, the reply; `lanes`,
-- what it knows of each lane it visited: claim_lane), whether a lane `left` a ring, `dry`
-- visits (by work) and the queue's rate budget: `qroom` (nil: no rate), `qunits` spent in this
-- call, `qwhole` (its sliding log read whole: a costed head that does not fit reads it so,
-- once) and `qcost` (the head its room was short of: the walk ended there).
local fair = cfg[13] -- fairness by work: the quantum a visit grants per unit of weight
local deadline = now + lease
local c = {cfg = cfg, now = now, deadline = deadline, want = want, one_lane = ARGV[3] == '1',
  ordered = cfg[5] ~= false, banded = banded, bands = bands, listed = listed,
  costed = cfg[12] ~= false, fair = fair, quantum = fair and fair_quantum(fair, cfg[14], cfg[12]),
  taken = 0, out = {deadline, 1}, lanes = {}, left = false, dry = 0, qmax = qmax,
  qwindow = qwindow, qroom = qroom, qunits = 0, qwhole = not qsmooth}
walk_bands(root, c)

local taken, out = c.taken, c.out
if taken == 0 then
  if c.qcost then
    return math.max(1, rate_wait_for(limiter, qlog, qmax, qwindow, qsmooth, now, c.qcost))
  end
  -- Nothing claimable: when a benched lane returns (-ms), or nil.
  local due = redis.call('ZRANGE', rdue, 0, 0, 'WITHSCORES')
  if due[2] then return -math.max(1, tonumber(due[2]) - now) end
  return nil
end
for g, l in pairs(c.lanes) do
  if l.leased > 0 then
    redis.call('HINCRBY', root .. 'gactive', g, l.leased)
    if l.extra > 0 then redis.call('HINCRBY', root .. 'gextra', g, l.extra) end
    redis.call('HINCRBY', root .. 'served', g, l.leased) -- for ETAs: count_claims
  end
end
if qmax > 0 then rate_spend(limiter, qlog, qmax, qwindow, qsmooth, now, c.qunits) end
count_claims(root, now, taken)
if c.left and not any_ringed(root, bands) then out[2] = 0 end
if with_load then append_load(root, out, cfg[9]) end
return out
