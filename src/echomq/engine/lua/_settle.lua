-- _settle.lua: the settle rule every settle shares (the fencing token holds the job) and taking a
-- job out of whichever set holds it. A library: each transition gets the helpers it calls
-- (engine/scripts.py).

-- The fields every settle needs, in one read: {attempts, state, group, dedup, reaped, cancel,
-- parent, result_ttl, cost, charged} (charged: a lease's run-time charge, see charge_time; cancel: the reason a cancel asked a leased job to stop with, see
-- cancel.lua; parent: the job is a flow's child; result_ttl: its own keep, enqueue.lua).
local function read_row(row)
  return redis.call('HMGET', row, 'attempts', 'state', 'group', 'dedup', 'reaped', 'cancel',
    'parent', 'result_ttl', 'cost', 'charged')
end

-- The one settle rule of complete, retry, delay and extend: the claim that minted `token` may
-- settle while the job is still its own: leased (`active`, even past its deadline), or reaped
-- and not claimed since (`pending` with `reaped` = token; the next claim moves the token on).
-- Returns the row's fields (read_row) when `token` holds the job; else nil and why: nil (no
-- row), 'stale' (another claim holds it now) or 'settled' (this claim settled it already).
-- Accepting a reaped job takes its stall back: its holder was alive, so no crash happened;
-- `peek` (a report that settles nothing: progress) accepts it and leaves the row as it is.
local function holding(row, token, peek)
  local fields = read_row(row)
  if not fields[1] then return nil, nil end
  if fields[1] ~= token then return nil, 'stale', fields end
  if fields[2] == 'active' then return fields end
  if fields[2] == 'pending' and fields[5] == token then
    if peek then return fields end
    redis.call('HDEL', row, 'reaped')
    if redis.call('HINCRBY', row, 'stalled', -1) <= 0 then redis.call('HDEL', row, 'stalled') end
    return fields
  end
  return nil, 'settled', fields
end

-- `holding` for the verbs that refuse: EMQSTALE when another claim holds the job, EMQSTATE
-- when this claim settled it already. Returns the fields, nil when the row is gone.
local function held(row, token, verb)
  local fields, refusal, seen = holding(row, token)
  if refusal == 'stale' then
    error({err = 'EMQSTALE ' .. verb .. ' token mismatch: row is at ' .. seen[1]})
  elseif refusal == 'settled' then
    error({err = 'EMQSTATE ' .. verb .. ' refused: this claim settled the job already (' ..
      seen[2] .. ')'})
  end
  return fields
end

-- Take job `id` out of whichever set holds it, per its row's state, with the bookkeeping that
-- goes with leaving it (gactive, lane membership, wakes). The row itself is left to the caller.
-- `fields` is read_row's answer; `keep`: the job goes on holding its lane (unhold). Returns the
-- job's group.
local function detach(root, id, fields, keep)
  local state, g = fields[2], fields[3] or '_'
  if state == 'active' then
    -- The meta read tells whether the queue is ordered too: an unordered queue's settle (the
    -- hot path) pays nothing for holders.
    local cfg = redis.call('HMGET', root .. 'meta', 'concurrency', 'ordered', 'dlimit', 'costed')
    local ceiling = tonumber(cfg[1] or '0')
    local active_before = 0
    if ceiling > 0 then active_before = redis.call('ZCARD', root .. 'active') end
    if redis.call('ZREM', root .. 'active', id) == 1 then
      if fields[10] then charge_time(root, g, fields[10]) end
      local before = release(root, g, 1)
      extra_moved(root, g, fields[9], -1)
      local limit = redis.call('HGET', root .. 'glimit', g) or cfg[3]
      -- In a costed queue a lane under its ceiling may still wait for room for its head's
      -- cost: every release asks (serviceable, and the claim, decide).
      if limit and (cfg[4] or before >= tonumber(limit)) then rering(root, g) end
      -- A slot under the queue's ceiling freed up: parked consumers may claim again.
      if ceiling > 0 and active_before >= ceiling then wake(root) end
    end
    if cfg[2] then unhold(root, g, id, keep) end
  elseif state == 'pending' then
    if redis.call('ZREM', lane_of(root, g), id) == 1 then lane_shrank(root, g) end
    unhold(root, g, id, keep)
  elseif state == 'scheduled' then
    if redis.call('ZREM', root .. 'schedule', id) == 1 then scheduled_moved(root, g, -1) end
    unhold(root, g, id, keep)
  elseif state == 'dead' then
    redis.call('ZREM', root .. 'dead', id)
  elseif state == 'completed' or state == 'cancelled' then
    redis.call('ZREM', root .. 'done', id)
  elseif state == 'waiting' then
    redis.call('ZREM', root .. 'waiting', id)
  end
  return g
end
