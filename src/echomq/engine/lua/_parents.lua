-- _parents.lua: flows: a child settled tells its parent, on this queue or through the outbox for
-- a parent on another. A library: each transition gets the helpers it calls (engine/scripts.py).

-- Append a flow entry for a parent on another queue (another slot on a cluster) to this
-- queue's outbox: "parent_q NUL parent NUL child NUL ok NUL policy NUL ms NUL value" (value
-- last: it may hold NULs). The worker's upkeep relays it to the parent's queue (flow_deliver.lua),
-- at least once; the parent counts each child once. The "s" wake token asks an idle consumer
-- for that upkeep now.
local function outbox_push(root, parent_q, parent, child, ok, policy, value)
  redis.call('RPUSH', root .. 'flow:outbox', table.concat({parent_q, parent, child,
    ok and '1' or '0', policy or '', now_ms(), value}, '\0'))
  redis.call('LPUSH', root .. 'wake', 's')
  redis.call('LTRIM', root .. 'wake', 0, 63)
end

-- Child `child` of waiting parent `parent` (a row of this queue) settled: `ok` with its result
-- (the codec's bytes), or failed with its error text, under `policy` ('ignore'; anything else
-- fails the parent). Counted once per child however often it is told (a re-run, an outbox
-- entry delivered twice): the child's field in the parent's `flow:<id>:results` or `:failed`
-- is the guard. At 0 children left the parent joins its lane; failing it buries it, which is
-- told to its own parent in turn (here, or through the outbox for another queue).
-- Returns 1 counted, 0 not (told before, or the parent is no longer waiting), -1 no parent row.
local function tell_parent(root, parent, child, ok, value, policy)
  while true do
    local prow = root .. 'job:' .. parent
    local state = redis.call('HGET', prow, 'state')
    if not state then return -1 end
    local results = root .. 'flow:' .. parent .. ':results'
    local failed = root .. 'flow:' .. parent .. ':failed'
    if state ~= 'waiting' or redis.call('HEXISTS', results, child) == 1
        or redis.call('HEXISTS', failed, child) == 1 then
      return 0
    end
    if ok then redis.call('HSET', results, child, value) else
      redis.call('HSET', failed, child, value) end
    if ok or policy == 'ignore' then
      if redis.call('HINCRBY', prow, 'deps', -1) <= 0 then
        local g = redis.call('HGET', prow, 'group') or '_'
        redis.call('ZREM', root .. 'waiting', parent)
        redis.call('HDEL', prow, 'deps')
        redis.call('HSET', prow, 'state', 'pending')
        push_lane(root, g, parent)
        rering(root, g, now_ms())
      end
      return 1
    end
    local now, reason = now_ms(), 'child ' .. child .. ' failed: ' .. value
    redis.call('ZREM', root .. 'waiting', parent)
    redis.call('HDEL', prow, 'deps')
    redis.call('HSET', prow, 'state', 'dead', 'last_error', reason, 'finished', now)
    redis.call('ZADD', root .. 'dead', now, parent)
    redis.call('HINCRBY', root .. 'metrics:failed', 'count', 1)
    redis.call('SPUBLISH', root .. 'done', parent) -- its waiters read it dead
    local up = redis.call('HMGET', prow, 'parent', 'parent_q', 'policy')
    if not up[1] then return 1 end
    if up[2] then
      outbox_push(root, up[2], up[1], parent, false, up[3], reason)
      return 1
    end
    parent, child, ok, value, policy = up[1], parent, false, reason, up[3]
  end
end

-- Job `id` (its row `row`, still readable) completed (`ok`, value = result bytes) or went dead
-- (value = its error): tell its flow parent, if it has one, here or through the outbox.
-- Returns true when an outbox entry was appended (the caller may say so: a relay is due).
local function child_settled(root, id, row, ok, value)
  local up = redis.call('HMGET', row, 'parent', 'parent_q', 'policy')
  if not up[1] then return false end
  if up[2] then
    outbox_push(root, up[2], up[1], id, ok, up[3], value)
    return true
  end
  tell_parent(root, up[1], id, ok, value, up[3])
  return false
end
