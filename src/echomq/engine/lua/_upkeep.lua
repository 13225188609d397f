-- _upkeep.lua: the upkeep every claim and tick runs: due scheduled jobs back to their lanes,
-- expired leases recovered or dead-lettered. A library: each transition gets the helpers it calls
-- (engine/scripts.py).

-- Move due scheduled jobs back to their own lanes; return benched lanes whose rate window
-- ended to the ring. Returns {jobs moved, lanes returned}.
local function promote_due(root, limit, now)
  local schedule, rdue = root .. 'schedule', root .. 'rdue'
  local touched = {}
  local due = redis.call('ZRANGE', schedule, '-inf', now, 'BYSCORE', 'LIMIT', 0, limit)
  for _, id in ipairs(due) do
    redis.call('ZREM', schedule, id)
    local row = root .. 'job:' .. id
    local g = redis.call('HGET', row, 'group')
    if g then
      scheduled_moved(root, g, -1)
      redis.call('HSET', row, 'state', 'pending')
      push_lane(root, g, id)
      touched[g] = true
    end
  end
  local lanes = 0
  for _, g in ipairs(redis.call('ZRANGE', rdue, '-inf', now, 'BYSCORE')) do
    redis.call('ZREM', rdue, g)
    touched[g] = true
    lanes = lanes + 1
  end
  for g in pairs(touched) do rering(root, g, now) end
  return {#due, lanes}
end

-- Return expired leases to their lanes; dead-letter jobs that stalled max_stalled times; end
-- jobs a cancel marked as cancelled (announced on `done`, not returned).
-- Returns {recovered ids, dead ids}. attempts is untouched: the next claim mints the token.
local function reap_expired(root, limit, max_stalled, now)
  local active = root .. 'active'
  local ceiling = tonumber(redis.call('HGET', root .. 'meta', 'concurrency') or '0')
  local active_before = redis.call('ZCARD', active)
  local recovered, dead, ended, touched = {}, {}, {}, {}
  for _, id in ipairs(redis.call('ZRANGE', active, '-inf', now, 'BYSCORE', 'LIMIT', 0, limit)) do
    redis.call('ZREM', active, id)
    local row = root .. 'job:' .. id
    local fields = redis.call('HMGET', row, 'group', 'attempts', 'cancel', 'dedup', 'cost')
    local g = fields[1] or '_'
    release(root, g, 1)
    extra_moved(root, g, fields[5], -1)
    touched[g] = true
    if fields[3] then
      -- Asked to cancel, and its holder never settled it: it ends cancelled, not run again.
      end_marked(root, id, row, fields[4], fields[3], now)
      ended[#ended + 1] = id
    elseif redis.call('HINCRBY', row, 'stalled', 1) >= max_stalled then
      bury(root, id, row, 'stalled', now)
      dead[#dead + 1] = id
    else
      -- `reaped` keeps the holder's token: until the next claim, it may still settle (held).
      redis.call('HSET', row, 'state', 'pending', 'reaped', fields[2])
      push_lane(root, g, id)
      recovered[#recovered + 1] = id
    end
  end
  for g in pairs(touched) do rering(root, g, now) end
  if ceiling > 0 and active_before >= ceiling and #recovered + #dead + #ended > 0 then
    wake(root)
  end
  announce(root, dead)
  announce(root, ended)
  return {recovered, dead}
end
