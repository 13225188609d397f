-- enqueue.lua: admit a chunk of jobs, each to its lane now or to the schedule for later.
-- One call admits k items (k >= 1), each atomic and idempotent on its own; the chunk is not a
-- transaction. A refused item writes nothing and the others go on (its checks run first).
-- KEYS[1] root      `emq:{q}:` (every other key is derived from it)
-- ARGV, eleven per item, item i at 11(i-1)+1 ..:
--   id        branded JOB id (minted host-side)
--   payload   bytes (the codec's output)
--   group     lane name (`_` = the default lane)
--   run_at    0 = now; > 0 = absolute run-at ms; < 0 = run in -run_at ms (server clock)
--   dedup     producer dedup key, or "" for none
--   dedup_ttl ms the dedup key lives, counted from now, whatever happens to the job (the row
--             records it as `dedup_ttl`, the `dedups` index by its expiry); 0 = as long as the
--             job's row (a kept result too; released when the job dies, see bury in _ends.lua)
--   dedup_from "enqueue" (dedup_ttl counts from now) or "finish": the key lives as long as the
--             job is not finished, then dedup_ttl (> 0) from its end (completed, dead, cancelled
--             or removed); the row records it as `dedup_after` (dedup_window in _ends.lua)
--   result_ttl ms this job's row is kept once completed, -1 = the completer's (complete.lua)
--   debounce  "" = none; else "wait_ms:max_ms:keep": the item is its dedup key's debounced job
--             (run_at is -wait_ms). While the job the key maps to waits in the schedule and never
--             ran (attempts 0), the item moves it to now + wait_ms (at most the first call's
--             time + max_ms, the row's `deb_until`; max 0 = unbounded) and, with keep "last",
--             replaces its payload: {3, that id, "scheduled"}. Otherwise (no such job, or it
--             is due, running or done) the item is a new job and the key moves to it.
--   priority  0..9, higher = more urgent; 5 = the default band (the row records `prio` only
--             for another; the lane scores the job 5 - priority: see push_lane in _lane_jobs.lua)
--   cost      1..1000, the job's units (the row records `cost` only when not 1, and the queue
--             is marked `costed` with the dearest cost yet: the claim reads costs only then)
-- On a shard of a sharded queue ARGV opens with "fence" and the producer's placement epoch,
-- and each item has a twelfth word, its lane's slot (0..16383): an item of a lane this shard
-- does not serve is refused EMQMOVED before its dedup key or id is read (_shard.lua); an item
-- of a lane held here for a move whose key and id this shard does not hold is refused EMQHELD
-- (its producer looks for the key, and for an id its caller gave, on the source the refusal
-- names, then sends the item again in a call opening "fence checked", or answers the
-- duplicate it found there). A call with no fence on a shard (meta `shard` set: a plain queue
-- on a sharded queue's name) is refused whole, EMQSHARDED, before its first write (unfenced in
-- _shard.lua; items before it wrote nothing: their answers, duplicates say, are dropped with
-- the call).
-- Returns three values per item, in order: {1, id, ""} enqueued, {2, id, ""} scheduled,
-- {3, id, "scheduled"} debounced (an earlier call's job moved, see debounce),
-- {0, existing_id, state} duplicate (state: the existing job's row state, read in this call:
-- pending, scheduled, active, waiting, completed, dead, cancelled, or "absent" when a dedup
-- key outlived its job's row), {-1, "EMQKIND …" | "EMQARG …" | "EMQFULL …" | "EMQMOVED …",
-- ""} refused (nothing of that item written; EMQHELD <source>: lane <lane>, above). EMQFULL:
-- the item's lane holds as many unfinished jobs as its backlog cap (the lane's `gcap`, else
-- meta `dcap`): pending, leased and scheduled (lane_backlog in _lane_jobs.lua). Duplicates answer before the cap: they write nothing.
local root = KEYS[1]
local wake_key = root .. 'wake'
local now -- read once, when the first item needs the clock
local wakes, due_changed = 0, false
local fence = fence_reader(root, ARGV) -- nil: not a shard (ARGV holds no fence)
-- Before the call's first write (an item's cap check, which every admitted item passes, or a
-- debounce that moves a job), meta `dcap` is read once, and `shard` with it: a call with no
-- fence on a shard is refused there. The cap reader is made with `dcap` from this read, so an
-- admitted item costs no command more; a call of duplicates alone writes nothing and reads no
-- meta.
local cap_of -- the call's cap reader, made at its first write (nil: none yet)
local function first_write()
  local marks = redis.call('HMGET', root .. 'meta', 'shard', 'dcap')
  if marks[1] and not fence then return unfenced(root, marks[1]) end
  cap_of = cap_reader(root, marks[2])
  return nil
end
local backlogs = {} -- a capped lane's backlog, read once per call, counted on as items join it
local banded -- meta `banded`, read when an item first needs it (nil: not read yet)
local costed -- meta `costed`, read with `banded` (nil: not read yet)

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
local function record_priority(row, p)
  if p == 5 then return end
  redis.call('HSET', row, 'prio', p)
  if not banded then
    redis.call('HSET', root .. 'meta', 'banded', 1)
    banded = true
  end
end

-- A debounced call against the job its key maps to (see debounce above): 3 when it moved
-- that job, nil when the job has left the schedule or started (the call makes a new one).
local function debounced(seen, payload, debounce)
  local srow = root .. 'job:' .. seen
  local state = redis.call('HMGET', srow, 'state', 'attempts', 'deb_until')
  if state[1] ~= 'scheduled' or state[2] ~= '0' then return nil end
  local wait, keep = string.match(debounce, '^(%d+):%d+:(%a+)$')
  now = now or now_ms()
  local due = now + tonumber(wait)
  local latest = tonumber(state[3] or '0')
  if latest > 0 and due > latest then due = latest end
  if redis.call('ZADD', root .. 'schedule', 'XX', 'CH', due, seen) == 1 then
    due_changed = true
  end
  if keep == 'last' then redis.call('HSET', srow, 'payload', payload) end
  return 3
end

-- A job of cost c ~= 1: the row keeps it and the queue is marked `costed`, with the dearest
-- cost it admitted (fairness by cost grants that much per visit by default: _fair.lua).
local costmax -- meta `costed` as read (0: not costed yet; nil: not read yet)
local function record_cost(row, c)
  if c == 1 then return end
  redis.call('HSET', row, 'cost', c)
  costmax = costmax or tonumber(redis.call('HGET', root .. 'meta', 'costed') or '0')
  if c > costmax then
    redis.call('HSET', root .. 'meta', 'costed', c)
    costmax, costed = c, true
  end
end

local function admit(id, payload, g, run_at_arg, dedup, ttl_arg, from_arg, keep_arg, debounce,
    prio_arg, cost_arg, slot_arg)
  -- Policy before existence before write: every check comes before the item's first write.
  -- run_at: 10 years of delay, or an absolute time before 2^53 ms (the host bounds it closer).
  local run_at, refused = int_or_refusal(run_at_arg, 'run_at', -315360000000, 9007199254740991)
  if refused then return -1, refused end
  local dedup_ttl, refused_ttl = int_or_refusal(ttl_arg, 'dedup_ttl', 0, 315360000000)
  if refused_ttl then return -1, refused_ttl end
  local keep, refused_keep = int_or_refusal(keep_arg, 'result_ttl', -1, 2592000000)
  if refused_keep then return -1, refused_keep end
  local p, refused_prio = int_or_refusal(prio_arg, 'priority', 0, 9)
  if refused_prio then return -1, refused_prio end
  local c, refused_cost = int_or_refusal(cost_arg, 'cost', 1, 1000)
  if refused_cost then return -1, refused_cost end
  if from_arg ~= 'enqueue' and from_arg ~= 'finish' then
    return -1, 'EMQARG dedup_from ' .. from_arg .. ': must be enqueue or finish'
  end
  local from_finish = from_arg == 'finish' and dedup ~= ''
  if from_finish and dedup_ttl == 0 then
    return -1, 'EMQARG dedup_ttl 0: counting from the finish needs a ttl > 0'
  end
  if string.sub(id, 1, 3) ~= 'JOB' then
    return -1, 'EMQKIND job id must be JOB-namespaced, got ' .. id
  end
  local latest = 0
  if debounce ~= '' then
    local wait, most, keep = string.match(debounce, '^(%d+):(%d+):(%a+)$')
    if not wait or (keep ~= 'last' and keep ~= 'first') or dedup == '' then
      return -1, 'EMQARG debounce ' .. debounce .. ': must be wait_ms:max_ms:last|first, keyed'
    end
    if tonumber(most) > 0 then
      now = now or now_ms()
      latest = now + tonumber(most)
    end
  end
  -- The fence before existence: a lane this shard does not serve reads nothing more.
  local source
  if fence then
    local moved
    moved, source = fence(g, slot_arg)
    if moved then return -1, moved end
  end
  local row = root .. 'job:' .. id
  if dedup ~= '' then
    local seen = redis.call('GET', root .. 'de:' .. dedup)
    if seen and debounce ~= '' and seen ~= id then
      if not cap_of then
        local unsharded = first_write()
        if unsharded then return -2, unsharded end
      end
      local code = debounced(seen, payload, debounce)
      if code then return code, seen, 'scheduled' end
      seen = nil -- its job is due, running or done: this call starts the next one
    end
    if seen then
      return 0, seen, redis.call('HGET', root .. 'job:' .. seen, 'state') or 'absent'
    end
  end
  local held = redis.call('HGET', row, 'state')
  if held then return 0, id, held end
  -- A lane held here for a move: its key, or its id (sent again by its caller), may name a job
  -- still on its source, not copied yet (a minted id never does: its producer reads nothing).
  if source then return -1, 'EMQHELD ' .. source .. ': lane ' .. g end
  if not cap_of then -- the call's first write: read once (an item after it costs a compare)
    local unsharded = first_write()
    if unsharded then return -2, unsharded end
  end
  local cap = cap_of(g)
  if cap then
    local backlog = backlogs[g] or lane_backlog(root, g)
    if backlog >= cap then
      return -1, 'EMQFULL lane full: ' .. backlog .. ' unfinished jobs, cap ' .. cap ..
        ', lane ' .. g
    end
    backlogs[g] = backlog + 1 -- past every check: the item is written below
  end

  if dedup ~= '' then
    if dedup_ttl > 0 and not from_finish then
      redis.call('SET', root .. 'de:' .. dedup, id, 'PX', dedup_ttl)
      -- Indexed by expiry, so obliterate finds a key that outlived its row; expired ones go.
      now = now or now_ms()
      redis.call('ZADD', root .. 'dedups', now + dedup_ttl, dedup)
      redis.call('ZREMRANGEBYSCORE', root .. 'dedups', '-inf', now - 1)
    else
      redis.call('SET', root .. 'de:' .. dedup, id)
    end
  end

  if run_at ~= 0 then
    now = now or now_ms()
    local at = run_at
    if run_at < 0 then at = now - run_at end
    if at > now then
      redis.call('HSET', row, 'state', 'scheduled', 'attempts', 0, 'payload', payload, 'group', g)
      if latest > 0 then redis.call('HSET', row, 'deb_until', latest) end
      record_dedup(row, dedup, dedup_ttl, from_finish, keep)
      record_priority(row, p)
      record_cost(row, c)
      redis.call('ZADD', root .. 'schedule', at, id)
      scheduled_moved(root, g, 1)
      due_changed = true
      return 2, id
    end
  end

  redis.call('HSET', row, 'state', 'pending', 'attempts', 0, 'payload', payload, 'group', g)
  record_dedup(row, dedup, dedup_ttl, from_finish, keep)
  record_priority(row, p)
  record_cost(row, c)
  -- A lane that was empty was off the ring (the ring holds only serviceable lanes).
  local depth = push_lane(root, g, id, p)
  if depth > 1 then
    -- The job may be the lane's new head, in another band: the lane follows it. A queue with
    -- one band in use pays nothing for this (meta `banded`: record_priority).
    if banded == nil or costed == nil then
      local marks = redis.call('HMGET', root .. 'meta', 'banded', 'costed')
      banded, costed = marks[1] ~= false, marks[2] ~= false
    end
    if costed then
      -- Its budgets judge the job it serves next, which may be this one now.
      if redis.call('ZRANGE', lane_of(root, g), 0, 0)[1] == id then rering(root, g) end
    elseif banded then
      reband(root, g)
    end
  elseif depth == 1 then
    if serviceable(root, g) then
      ring_join(root, g, p)
      wakes = wakes + 1
    elseif lane_rate_wait(root, g) > 0 then
      -- Its rate window is spent: bench it so promote rings it when the window ends (an empty
      -- lane is never benched, so without this it would wait for an enqueue after the window).
      now = now or now_ms()
      bench(root, g, now)
      due_changed = true
    end
  end
  return 1, id
end

local out = {}
local first, width = 1, 11
if fence then first, width = 3, 12 end
for i = first, #ARGV, width do
  local code, value, state = admit(ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3],
    ARGV[i + 4], ARGV[i + 5], ARGV[i + 6], ARGV[i + 7], ARGV[i + 8], ARGV[i + 9], ARGV[i + 10],
    fence and ARGV[i + 11])
  if code == -2 then return redis.error_reply(value) end -- nothing of the call written yet
  out[#out + 1], out[#out + 2], out[#out + 3] = code, value, state or ''
end

-- One wake token per lane that joined the ring, pushed once for the chunk (the list is capped
-- at 64); token "s" tells idle consumers to learn the new due time from an upkeep.
if wakes > 0 then
  local tokens = {}
  for n = 1, math.min(wakes, 64) do tokens[n] = '1' end
  redis.call('LPUSH', wake_key, unpack(tokens))
end
if due_changed then redis.call('LPUSH', wake_key, 's') end
if wakes > 0 or due_changed then redis.call('LTRIM', wake_key, 0, 63) end
return out
