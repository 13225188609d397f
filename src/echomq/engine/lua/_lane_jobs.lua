-- _lane_jobs.lua: a lane's jobs: pushing one at its priority, an ordered lane's next, the lane
-- shrinking, jobs leaving it, its backlog and its cap. A library: each transition gets the
-- helpers it calls (engine/scripts.py).

-- The job an ordered lane serves next, taken out of the lane: its holder when that is back in
-- the lane (reaped, or promoted after a retry or a defer), else the oldest job, which becomes
-- the holder. Answers as ZPOPMIN does ({id, score}), or {} while the holder is out of the lane.
local function pop_ordered(root, g)
  local lane = lane_of(root, g)
  local h = holder(root, g)
  if h then
    if redis.call('ZREM', lane, h) == 1 then return {h, '0'} end
    return {}
  end
  local heads = redis.call('ZPOPMIN', lane, 1)
  if heads[1] then redis.call('HSET', root .. 'holders', g, heads[1]) end
  return heads
end

-- After job id left its place (detach): a holder that finished frees its lane, one that goes on
-- holding (`keep`: a retry or a defer) keeps it; either way the lane's place on the ring follows.
local function unhold(root, g, id, keep)
  if redis.call('HGET', root .. 'holders', g) ~= id then return end
  if not keep then redis.call('HDEL', root .. 'holders', g) end
  rering(root, g)
end

-- Add id to g's lane at its priority `p` (nil: the row's `prio`, absent = the default),
-- keeping `lanes` = non-empty lanes. Returns the lane's depth after. The caller re-rings the
-- lane (rering), which also moves it when the job became its head in another band.
local function push_lane(root, g, id, p)
  local lane = lane_of(root, g)
  if not p then
    p = tonumber(redis.call('HGET', root .. 'job:' .. id, 'prio') or 5)
  end
  redis.call('ZADD', lane, 5 - p, id)
  local depth = redis.call('ZCARD', lane)
  if depth == 1 then redis.call('SADD', root .. 'lanes', g) end
  return depth
end

-- After ids left g's lane: forget an emptied lane and take it off the ring; a lane whose head
-- left moves to its new head's band.
local function lane_shrank(root, g)
  if redis.call('ZCARD', lane_of(root, g)) == 0 then
    redis.call('SREM', root .. 'lanes', g)
    dering(root, g)
  elseif redis.call('HEXISTS', root .. 'meta', 'costed') == 1 then
    rering(root, g) -- its new head may fit its budgets where the old one did not, or not
  else
    reband(root, g)
  end
end

-- gactive - n for g, deleting the field at zero. Returns the count before.
local function release(root, g, n)
  local after = redis.call('HINCRBY', root .. 'gactive', g, -n)
  if after <= 0 then redis.call('HDEL', root .. 'gactive', g) end
  return after + n
end

-- gscheduled + n for g (n = 1 or -1), deleting the field at zero: how many of g's jobs wait in
-- the schedule (delayed at enqueue, retrying or deferred). A lane's backlog cap counts them
-- (enqueue.lua); every move into or out of `schedule` goes through here.
local function scheduled_moved(root, g, n)
  local after = redis.call('HINCRBY', root .. 'gscheduled', g, n)
  if after <= 0 then redis.call('HDEL', root .. 'gscheduled', g) end
end

-- Lane g's backlog: its unfinished jobs, pending in its lane, leased or scheduled (what its
-- cap bounds at admission; flow parents waiting for children are in no lane yet).
local function lane_backlog(root, g)
  return redis.call('ZCARD', lane_of(root, g))
    + tonumber(redis.call('HGET', root .. 'gactive', g) or '0')
    + tonumber(redis.call('HGET', root .. 'gscheduled', g) or '0')
end

-- A reader of the lanes' backlog caps for one script call: cap_of(g) is lane g's cap (its own
-- `gcap`, else meta `dcap`) or nil for none, each read once per call; a queue with no cap
-- anywhere costs one EXISTS in all besides the caller's read of meta `dcap`, given as `dcap`
-- (false: none; enqueue.lua reads it with `shard`, at the call's first write: first_write in
-- _admit_writes.lua).
local function cap_reader(root, dcap)
  local caps, default, any = {}, dcap, nil
  return function(g)
    if any == nil then
      any = default ~= false or redis.call('EXISTS', root .. 'gcap') == 1
    end
    if not any then return nil end
    if caps[g] == nil then
      caps[g] = tonumber(redis.call('HGET', root .. 'gcap', g) or default or '0')
    end
    if caps[g] == 0 then return nil end
    return caps[g]
  end
end
