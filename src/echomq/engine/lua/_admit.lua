-- _admit.lua: the admission of one item (enqueue.lua): policy before existence before write —
-- its words checked, its lane's fence on a shard, its dedup key (a duplicate, or a debounced
-- job moved), its row, its lane's backlog cap; then its writes (the row's own fields and its
-- key in _admit_writes.lua), its place (the schedule, or its lane and the ring). `a` is the
-- call's state (enqueue.lua). A library: each transition gets the helpers it calls
-- (engine/scripts.py).

-- Admit one item. Returns its code and value (and a duplicate's or a debounce's state): as
-- enqueue.lua answers it, or -2 and the call's refusal (EMQSHARDED: nothing written yet).
local function admit_item(root, a, id, payload, g, run_at_arg, dedup, ttl_arg, from_arg,
    keep_arg, debounce, prio_arg, cost_arg, slot_arg)
  -- Its words checked first. The checks and the lane's join below stay inline: a function call
  -- more per item cost ~0.1-0.2 µs an item (2%) in chunks of 100.
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
  local latest = 0 -- a debounced job's latest run-at (server ms; 0: unbounded or none)
  if debounce ~= '' then
    local wait, most, last = string.match(debounce, '^(%d+):(%d+):(%a+)$')
    if not wait or (last ~= 'last' and last ~= 'first') or dedup == '' then
      return -1, 'EMQARG debounce ' .. debounce .. ': must be wait_ms:max_ms:last|first, keyed'
    end
    if tonumber(most) > 0 then
      a.now = a.now or now_ms()
      latest = a.now + tonumber(most)
    end
  end
  -- The fence before existence: a lane this shard does not serve reads nothing more.
  local source
  if a.fence then
    local moved
    moved, source = a.fence(g, slot_arg)
    if moved then return -1, moved end
  end
  local row = root .. 'job:' .. id
  if dedup ~= '' then
    local seen = redis.call('GET', root .. 'de:' .. dedup)
    if seen and debounce ~= '' and seen ~= id then
      if not a.cap_of then
        local unsharded = first_write(root, a)
        if unsharded then return -2, unsharded end
      end
      local code = debounced(root, a, seen, payload, debounce)
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
  if not a.cap_of then -- the call's first write: read once (an item after it costs a compare)
    local unsharded = first_write(root, a)
    if unsharded then return -2, unsharded end
  end
  local cap = a.cap_of(g)
  if cap then
    local backlog = a.backlogs[g] or lane_backlog(root, g)
    if backlog >= cap then
      return -1, 'EMQFULL lane full: ' .. backlog .. ' unfinished jobs, cap ' .. cap ..
        ', lane ' .. g
    end
    a.backlogs[g] = backlog + 1 -- past every check: the item is written below
  end

  if dedup ~= '' then set_dedup(root, a, dedup, id, dedup_ttl, from_finish) end
  local at -- a job that runs later: when (server ms)
  if run_at ~= 0 then
    a.now = a.now or now_ms()
    at = run_at < 0 and a.now - run_at or run_at
    if at <= a.now then at = nil end
  end
  redis.call('HSET', row, 'state', at and 'scheduled' or 'pending', 'attempts', 0, 'payload',
    payload, 'group', g)
  if at and latest > 0 then redis.call('HSET', row, 'deb_until', latest) end
  record_dedup(row, dedup, dedup_ttl, from_finish, keep)
  record_priority(root, a, row, p)
  record_cost(root, a, row, c)
  if at then
    redis.call('ZADD', root .. 'schedule', at, id)
    scheduled_moved(root, g, 1)
    a.due_changed = true
    return 2, id
  end
  -- A lane that was empty was off the ring (the ring holds only serviceable lanes).
  local depth = push_lane(root, g, id, p)
  if depth > 1 then
    -- The job may be the lane's new head, in another band: the lane follows it. A queue with
    -- one band in use pays nothing for this (meta `banded`: record_priority).
    if a.banded == nil or a.costed == nil then
      local marks = redis.call('HMGET', root .. 'meta', 'banded', 'costed')
      a.banded, a.costed = marks[1] ~= false, marks[2] ~= false
    end
    if a.costed then
      -- Its budgets judge the job it serves next, which may be this one now.
      if redis.call('ZRANGE', lane_of(root, g), 0, 0)[1] == id then rering(root, g) end
    elseif a.banded then
      reband(root, g)
    end
  elseif depth == 1 then
    if serviceable(root, g) then
      ring_join(root, g, p)
      a.wakes = a.wakes + 1
    elseif lane_rate_wait(root, g) > 0 then
      -- Its rate window is spent: bench it so promote rings it when the window ends (an empty
      -- lane is never benched, so without this it would wait for an enqueue after the window).
      a.now = a.now or now_ms()
      bench(root, g, a.now)
      a.due_changed = true
    end
  end
  return 1, id
end
