-- _fair.lua: fairness by work (meta `fair`): deficit round robin over the ring, a lane's turn
-- measured in units (`cost`) or in run time (`time`) instead of claims. Self-contained
-- (_settle.lua's detach charges run time at every settle).
-- Keys: `gdeficit` lane -> its credit (units, or ms of run time; may be negative: a debt);
-- `grun` lane -> its jobs' run time in ms, a moving average (by time only). Both hold only
-- lanes with work: the claim forgets a lane that empties (forget_share).

-- The quantum a visit grants per unit of weight: meta `quantum` when set; else by cost the
-- dearest job the queue admitted (meta `costed`, see enqueue.lua: every visit then serves at
-- least one job), by time 100 ms.
local function fair_quantum(fair, quantum, costed)
  if quantum then return tonumber(quantum) end
  if fair == 'cost' then return math.max(1, tonumber(costed or '1') or 1) end
  return 100
end

-- What a claim charges each job of lane g by time: its moving average, or the quantum while
-- the lane has none (one job per visit until its first settle says more).
local function run_estimate(root, g, quantum)
  return math.max(1, tonumber(redis.call('HGET', root .. 'grun', g) or quantum))
end

-- An emptied lane starts afresh when it returns (as deficit round robin forgets idle flows).
local function forget_share(root, g)
  redis.call('HDEL', root .. 'gdeficit', g)
  redis.call('HDEL', root .. 'grun', g)
end

-- A lease of lane g ended (completed, retried, dead, cancelled): `charged` ("estimate:claimed
-- ms", written by the claim) is set right against what the job took: `ran`, the ms its handler
-- ran as its consumer measured it (complete.lua), else the time it held its lease, on the
-- server clock. The lane's credit gets estimate - measured back, and its average learns the
-- measure. A lane that emptied meanwhile was forgiven its share: nothing is charged.
local function charge_time(root, g, charged, ran)
  local estimate, claimed = string.match(charged, '^(%d+):(%d+)$')
  if not estimate or redis.call('HEXISTS', root .. 'gdeficit', g) == 0 then return end
  if not ran or ran <= 0 then
    local t = redis.call('TIME')
    ran = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) - tonumber(claimed)
  end
  ran = math.max(1, ran)
  redis.call('HINCRBY', root .. 'gdeficit', g, tonumber(estimate) - ran)
  local runs = root .. 'grun'
  local average = tonumber(redis.call('HGET', runs, g) or ran)
  redis.call('HSET', runs, g, math.floor((7 * average + ran) / 8 + 0.5))
end
