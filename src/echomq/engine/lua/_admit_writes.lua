-- _admit_writes.lua: what an admission (enqueue.lua, admit_item in _admit.lua) writes besides
-- an item's state and place: the call's first write (its shard mark and cap reader read), a
-- debounced job moved, an item's dedup key and the fields its row has beyond the defaults
-- (result ttl, dedup, priority, cost, and the queue's marks that go with them). `a` is the
-- call's state (enqueue.lua). A library: each transition gets the helpers it calls
-- (engine/scripts.py).

-- Before the call's first write (an item's cap check, which every admitted item passes, or a
-- debounce that moves a job), meta `dcap` is read once, and `shard` with it: a call with no
-- fence on a shard is refused there (its refusal returned). The cap reader is made with `dcap`
-- from this read, so an admitted item costs no command more; a call of duplicates alone writes
-- nothing and reads no meta.
local function first_write(root, a)
  local marks = redis.call('HMGET', root .. 'meta', 'shard', 'dcap')
  if marks[1] and not a.fence then return unfenced(root, marks[1]) end
  a.cap_of = cap_reader(root, marks[2])
  return nil
end

-- A debounced call against the job its key maps to (enqueue.lua's header): 3 when it moved
-- that job, nil when the job has left the schedule or started (the call makes a new one).
local function debounced(root, a, seen, payload, debounce)
  local srow = root .. 'job:' .. seen
  local state = redis.call('HMGET', srow, 'state', 'attempts', 'deb_until')
  if state[1] ~= 'scheduled' or state[2] ~= '0' then return nil end
  local wait, keep = string.match(debounce, '^(%d+):%d+:(%a+)$')
  a.now = a.now or now_ms()
  local due = a.now + tonumber(wait)
  local latest = tonumber(state[3] or '0')
  if latest > 0 and due > latest then due = latest end
  if redis.call('ZADD', root .. 'schedule', 'XX', 'CH', due, seen) == 1 then
    a.due_changed = true
  end
  if keep == 'last' then redis.call('HSET', srow, 'payload', payload) end
  return 3
end

-- The row's own fields: the dedup key, and its own TTL when it has one (delete_row leaves such
-- a key to expire by itself) or the TTL it gets at the job's end (`dedup_after`); the keep
-- of this job's result when it has its own (`result_ttl`).
local function record_dedup(row, dedup, dedup_ttl, from_finish, keep)
  if keep >= 0 then redis.call('HSET', row, 'result_ttl', keep) end
  if dedup == '' then return end
  if from_finish then
    redis.call('HSET', row, 'dedup', dedup, 'dedup_after', dedup_ttl)
  elseif dedup_ttl > 0 then
    redis.call('HSET', row, 'dedup', dedup, 'dedup_ttl', dedup_ttl)
  else
    redis.call('HSET', row, 'dedup', dedup)
  end
end

-- A job outside the default band: the row keeps its priority (`prio`, for every later put-back
-- into its lane) and the queue is marked `banded` (the claim walks bands from then on).
local function record_priority(root, a, row, p)
  if p == 5 then return end
  redis.call('HSET', row, 'prio', p)
  if not a.banded then
    redis.call('HSET', root .. 'meta', 'banded', 1)
    a.banded = true
  end
end

-- A job of cost c ~= 1: the row keeps it and the queue is marked `costed`, with the dearest
-- cost it admitted (fairness by cost grants that much per visit by default: _fair.lua).
-- a.costmax: meta `costed` as read (0: not costed yet; nil: not read yet).
local function record_cost(root, a, row, c)
  if c == 1 then return end
  redis.call('HSET', row, 'cost', c)
  a.costmax = a.costmax or tonumber(redis.call('HGET', root .. 'meta', 'costed') or '0')
  if c > a.costmax then
    redis.call('HSET', root .. 'meta', 'costed', c)
    a.costmax, a.costed = c, true
  end
end

-- Job id's dedup key, now naming it: for dedup_ttl ms from now, or as long as the job's row.
local function set_dedup(root, a, dedup, id, dedup_ttl, from_finish)
  if dedup_ttl > 0 and not from_finish then
    redis.call('SET', root .. 'de:' .. dedup, id, 'PX', dedup_ttl)
    -- Indexed by expiry, so obliterate finds a key that outlived its row; expired ones go.
    a.now = a.now or now_ms()
    redis.call('ZADD', root .. 'dedups', a.now + dedup_ttl, dedup)
    redis.call('ZREMRANGEBYSCORE', root .. 'dedups', '-inf', a.now - 1)
  else
    redis.call('SET', root .. 'de:' .. dedup, id)
  end
end
