-- _lib.lua: helpers shared by every transition; the registry prepends this file to each script
-- (files whose name starts with "_" are libraries, not transitions). Every key is derived from
-- the queue root `emq:{q}:` that each script receives as KEYS[1], so all stay on one slot.

-- ARGV value `value` as an integer in [lo, hi]; else nil and the EMQARG refusal naming `name`
-- (a batch script answers it for the one item instead of failing the call).
local function int_or_refusal(value, name, lo, hi)
  local n = tonumber(value)
  if not n or n ~= n or n % 1 ~= 0 or n < lo or n > hi then
    return nil, string.format('EMQARG %s %s: must be an integer in [%.0f, %.0f]', name,
      tostring(value), lo, hi)
  end
  return n
end

-- ARGV value `value` as an integer in [lo, hi], or an EMQARG refusal naming `name`. Every
-- script checks its numbers with it before its first write, so a refused call writes nothing.
-- The bounds are the host's (engine/checks.py); Lua numbers are doubles, exact to 2^53.
local function int_arg(value, name, lo, hi)
  local n, refusal = int_or_refusal(value, name, lo, hi)
  if refusal then error({err = refusal}) end
  return n
end

-- A duration in ms: at most 10 years (MAX_DURATION).
local function ms_arg(value, name, lo)
  return int_arg(value, name, lo, 315360000000)
end

-- A fencing token (a job's attempts).
local function token_arg(value)
  return int_arg(value, 'token', 1, 9007199254740991)
end

-- Server clock in ms: leases, delays and windows never use a host clock.
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- A lane: the pending job ids of one group, scored by priority band (0 for the default band:
-- see push_lane), so within a band byte order = mint order.
local function lane_of(root, g)
  return root .. 'g:' .. g .. ':pending'
end

-- A job's log: its newest lines, oldest first (progress.lua); it lives as long as the row.
local function log_of(root, id)
  return root .. 'log:' .. id
end

-- The fixed-window rate counter of one lane.
local function lane_limiter_of(root, g)
  return root .. 'g:' .. g .. ':limiter'
end

-- One wake token per readiness event; parked consumers BLPOP the list. Capped at 64.
local function wake(root)
  redis.call('LPUSH', root .. 'wake', '1')
  redis.call('LTRIM', root .. 'wake', 0, 63)
end

-- A lane's sliding log (smooth rates): the server ms of its newest claims, oldest first (the
-- newest `max` decide; it holds at most twice that).
local function lane_claims_of(root, g)
  return root .. 'g:' .. g .. ':claims'
end

-- A stored rate: "max:window" (a fixed window of window ms) or "max:window:smooth" (a sliding
-- window: no `window` ms ever hold more than `max` claims). Returns max, window, is_smooth;
-- nil when `rate` is nil, false or "".
local function parse_rate(rate)
  if not rate or rate == '' then return nil, nil, false end
  local max, window, mode = string.match(rate, '^(%d+):(%d+):?(%a*)$')
  if not max then return nil, nil, false end
  return tonumber(max), tonumber(window), mode == 'smooth'
end

-- A rate value as the scripts store it, checked (EMQARG naming `name`) before any write.
local function rate_arg(value, name)
  local max, window, mode = string.match(value, '^(%d+):(%d+):?(%a*)$')
  if not max or (mode ~= '' and mode ~= 'smooth') then
    error({err = 'EMQARG ' .. name .. ' ' .. value .. ': must be "max:window_ms[:smooth]"'})
  end
  int_arg(max, 'max', 1, mode == 'smooth' and 10000 or 1000000000)
  ms_arg(window, 'window', 1)
end

-- The lane's rate budget: its own (`grate`), else the queue's default for lanes (meta `drate`);
-- max, window ms, is_smooth, or nil when unlimited. `default`: meta drate as the caller read it
-- already (false: read, and absent), or nil to read it here.
local function lane_rate(root, g, default)
  local rate = redis.call('HGET', root .. 'grate', g)
  if not rate then
    if default == nil then
      default = redis.call('HGET', root .. 'meta', 'drate')
    end
    rate = default
  end
  return parse_rate(rate)
end

-- Costs. A job spends `cost` units (row `cost`, written only when not 1: 1..1000; meta
-- `costed` marks a queue that admitted one, and only then does the claim read costs). Rates
-- count units, and so does a lane's ceiling: its units in flight are `gactive` (leased jobs)
-- plus `gextra` (the costs above 1 of its leased jobs, written only for such jobs).
local function lane_units(root, g)
  return tonumber(redis.call('HGET', root .. 'gactive', g) or '0')
    + tonumber(redis.call('HGET', root .. 'gextra', g) or '0')
end

-- A leased job of cost `cost` (its row's field: nil or false for 1) joins (+1) or leaves (-1)
-- g's units in flight beyond gactive.
local function extra_moved(root, g, cost, sign)
  if not cost or cost == '1' then return end
  local after = redis.call('HINCRBY', root .. 'gextra', g, sign * (tonumber(cost) - 1))
  if after <= 0 then redis.call('HDEL', root .. 'gextra', g) end
end

-- The lane's concurrency ceiling: its own (`glimit`), else the default (meta `dlimit`); nil
-- for none.
local function lane_ceiling(root, g)
  local limit = redis.call('HGET', root .. 'glimit', g)
      or redis.call('HGET', root .. 'meta', 'dlimit')
  return limit and tonumber(limit)
end

-- ms until a rate (max, window, smooth) admits one more claim, 0 = now. `counter` holds the
-- fixed window's count (its PTTL is the window left), `log` the sliding log.
local function rate_wait(counter, log, max, window, smooth, now)
  if smooth then
    -- The oldest of the newest `max` claims: one more fits once it leaves the window.
    local t = redis.call('LINDEX', log, -max)
    if not t then return 0 end
    return math.max(0, tonumber(t) + window - (now or now_ms()))
  end
  if tonumber(redis.call('GET', counter) or '0') < max then return 0 end
  local ttl = redis.call('PTTL', counter)
  if ttl <= 0 then return 1 end
  return ttl
end

-- ms until a rate admits `cost` more units (clamped to max: a job dearer than the whole
-- budget passes alone once the window is empty), 0 = now.
local function rate_wait_for(counter, log, max, window, smooth, now, cost)
  cost = math.min(cost, max)
  if smooth then
    local t = redis.call('LINDEX', log, cost - 1 - max)
    if not t then return 0 end
    return math.max(0, tonumber(t) + window - now)
  end
  if tonumber(redis.call('GET', counter) or '0') + cost <= max then return 0 end
  local ttl = redis.call('PTTL', counter)
  if ttl <= 0 then return 1 end
  return ttl
end

-- Claims a rate admits now: exact up to want + 1, so that after taking n <= want the caller
-- knows the budget is spent iff the room left is 0 (a fixed window tells its whole room). The
-- sliding log's newest `max` claims decide: k more fit iff the k-th of them (oldest first) has
-- left the window. One LRANGE reads the first min(want + 1, max) of them; from a log shorter
-- than `max`, it answers the newest (the missing oldest positions are free).
local function rate_room(counter, log, max, window, smooth, now, want)
  if not smooth then
    local used = tonumber(redis.call('GET', counter) or '0')
    if used >= max and redis.call('PTTL', counter) == -1 then
      redis.call('DEL', counter) -- a counter that lost its expiry would block forever
      return max
    end
    return max - used
  end
  local cap = math.min(want + 1, max)
  local seen = redis.call('LRANGE', log, -max, cap - max - 1)
  local free = cap - #seen -- positions 1..free hold no claim
  for k = free + 1, cap do
    if tonumber(seen[k - free]) > now - window then return k - 1 end
  end
  return cap
end

-- Spend n claims made at `now`. A sliding log trims itself to its newest `max` once it holds
-- twice that (one LTRIM per `max` claims); a lane's lives one window past its newest claim
-- (`expire`), the queue's one log has no expiry (it is bounded, and one key per queue).
local function rate_spend(counter, log, max, window, smooth, now, n, expire)
  if smooth then
    local kept
    if n == 1 then
      kept = redis.call('RPUSH', log, now)
    else
      local at = {}
      for i = 1, math.min(n, 1000) do at[i] = now end
      for i = 1, n, 1000 do -- unpack takes a bounded number of values
        kept = redis.call('RPUSH', log, unpack(at, 1, math.min(1000, n - i + 1)))
      end
    end
    if kept > 2 * max then redis.call('LTRIM', log, -max, -1) end
    if expire then redis.call('PEXPIRE', log, window) end
    return
  end
  if redis.call('INCRBY', counter, n) == n then redis.call('PEXPIRE', counter, window) end
end

-- A rate was set to (max, window, smooth) (max nil: removed): the claims already made carry on
-- and count against it, so applying a rate again, or changing it, grants no fresh budget. A
-- fixed window in flight keeps its count and ends when it would have, or one new window from
-- now if that is sooner. Changing mode converts: a fixed window's count becomes that many claims
-- leaving the sliding window when the fixed one would have ended; a sliding log's claims become
-- the count of a fixed window that ends when the oldest of them leaves the new window.
local function rate_moved(counter, log, max, window, smooth, now, expire)
  if not max then return end -- the state expires by itself; a rate set again finds it
  if smooth then
    local used, ttl = tonumber(redis.call('GET', counter) or '0'), redis.call('PTTL', counter)
    redis.call('DEL', counter)
    if used > 0 and ttl > 0 then
      -- Log entries are in time order: the converted ones sort in among any kept.
      local all, t = redis.call('LRANGE', log, 0, -1), now + math.min(ttl, window) - window
      for _ = 1, math.min(used, max) do all[#all + 1] = t end
      table.sort(all, function(a, b) return tonumber(a) < tonumber(b) end)
      redis.call('DEL', log)
      for i = 1, #all, 1000 do -- unpack takes a bounded number of values
        redis.call('RPUSH', log, unpack(all, i, math.min(i + 999, #all)))
      end
    end
    if redis.call('EXISTS', log) == 1 then
      redis.call('LTRIM', log, -max, -1)
      if expire then redis.call('PEXPIRE', log, window) end
    end
    return
  end
  local entries, kept, first = redis.call('LRANGE', log, 0, -1), 0, nil
  redis.call('DEL', log)
  for _, at in ipairs(entries) do
    if tonumber(at) > now - window then
      kept, first = kept + 1, first or tonumber(at)
    end
  end
  if kept > 0 and tonumber(redis.call('GET', counter) or '0') < kept then
    redis.call('SET', counter, math.min(kept, max), 'PX', first + window - now)
  end
  local ttl = redis.call('PTTL', counter)
  if ttl > window then redis.call('PEXPIRE', counter, window) end
end

-- The cost of the job lane g serves next (1 for an empty lane): its head, or in an ordered
-- queue its holder when that waits in the lane.
local function head_cost(root, g)
  local lane = lane_of(root, g)
  local next_id = redis.call('HGET', root .. 'holders', g)
  if not next_id or not redis.call('ZSCORE', lane, next_id) then
    next_id = redis.call('ZRANGE', lane, 0, 0)[1]
  end
  if not next_id then return 1 end
  return tonumber(redis.call('HGET', root .. 'job:' .. next_id, 'cost') or '1')
end

-- head_cost in a costed queue (meta `costed`), else 1 without reading the lane.
local function lane_head_cost(root, g)
  if redis.call('HEXISTS', root .. 'meta', 'costed') == 0 then return 1 end
  return head_cost(root, g)
end

-- ms until the lane's rate admits its next job (`cost` units: nil reads the head's), else 0.
local function lane_rate_wait(root, g, now, cost)
  local max, window, smooth = lane_rate(root, g)
  if not max then return 0 end
  local counter, log = lane_limiter_of(root, g), lane_claims_of(root, g)
  cost = cost or lane_head_cost(root, g)
  return rate_wait_for(counter, log, max, window, smooth, now or now_ms(), cost)
end

-- ms lane g is still cooling (lane.cool, a handler's Cool), else 0. `cooling` maps a lane to
-- the server ms its cool ends; an entry found past its end is dropped here, so only write
-- scripts call it (lanes.lua reads the hash itself).
local function lane_cool_wait(root, g, now)
  local at = redis.call('HGET', root .. 'cooling', g)
  if not at then return 0 end
  local left = tonumber(at) - (now or now_ms())
  if left > 0 then return left end
  redis.call('HDEL', root .. 'cooling', g)
  return 0
end

-- Ordered queues (meta `ordered`): `holders` maps a lane to the job that holds it, claimed and
-- not finished: leased, scheduled by a retry or a defer, or back in its lane after a reap. No
-- other job of the lane is claimed meanwhile. Returns the live holder of g, or nil. A holder
-- whose row left the lane for good (deleted, dead, completed, moved to another lane) is stale:
-- forgotten here, so a transition that ends a job without releasing it cannot block the lane.
local function holder(root, g)
  local h = redis.call('HGET', root .. 'holders', g)
  if not h then return nil end
  local fields = redis.call('HMGET', root .. 'job:' .. h, 'state', 'group')
  local state = fields[1]
  if (fields[2] or '_') == g and (state == 'active' or state == 'scheduled'
      or state == 'pending') then
    return h
  end
  redis.call('HDEL', root .. 'holders', g)
  return nil
end

-- Serviceable = lane non-empty, not paused, not cooling, under its ceiling, under its rate
-- budget, and (in an ordered queue) not held by a job out of the lane; on a shard of a sharded
-- queue, not on the move (docs/concepts/shards.md, "Moving a lane"): neither frozen on its
-- source (`moved` names it) nor held on its target (`adopted` names its source until the
-- release sets it to ""). The ring holds exactly these groups. In units (a costed queue): the job it serves next fits both budgets, or passes
-- alone (nothing of the lane in flight; an untouched window, see rate_wait_for).
local function serviceable(root, g)
  if redis.call('ZCARD', lane_of(root, g)) == 0 then return false end
  local h = holder(root, g)
  if h and not redis.call('ZSCORE', lane_of(root, g), h) then return false end
  if redis.call('SISMEMBER', root .. 'paused', g) == 1 then return false end
  if redis.call('HEXISTS', root .. 'moved', g) == 1 then return false end
  local from = redis.call('HGET', root .. 'adopted', g)
  if from and from ~= '' then return false end
  if lane_cool_wait(root, g) > 0 then return false end
  local limit, cost = lane_ceiling(root, g), nil
  if limit then
    local units = lane_units(root, g)
    if units >= limit then return false end
    if units > 0 then
      cost = lane_head_cost(root, g)
      if units + cost > limit then return false end
    end
  end
  return lane_rate_wait(root, g, nil, cost) == 0
end

-- Bench a lane whose rate budget is spent until its window ends, or that cools until its cool
-- ends, whichever is later (promote, and the claim, bring it back at that score). A cooling
-- lane stays in `rdue` until its cool ends, with work or without (cool.lua puts it there):
-- nothing else brings it back, and every path that takes it out benches it again.
local function bench(root, g, now)
  local wait = math.max(lane_rate_wait(root, g, now), lane_cool_wait(root, g, now))
  if wait > 0 then redis.call('ZADD', root .. 'rdue', now + wait, g) end
end

-- Priority bands. A job's priority p (0..9, higher = more urgent; default 5) is its score in
-- its lane: 5 - p, so the default band scores 0 (byte order = mint order within a score) and a
-- lane serves its jobs by priority, then mint order. A lane sits on the ring of its head job's
-- band: `ring` for the default band (the one key a queue without priorities ever uses),
-- `band:<p>:ring` for the others, each with its own `turn` (`turn`, `band:<p>:turn`). `gband`
-- maps a lane on another band's ring to that band; meta `bands` holds the other bands whose
-- ring may be non-empty, their digits most urgent first (read by the claim with its settings;
-- claim.lua drops one it finds empty).
-- meta `banded` marks a queue that admitted a job outside the default band: the claim walks
-- bands and watches head bands only then. (The scripts spell the default band 5: the linker
-- copies only functions.)
-- The band of lane g's head job (the default for an empty lane).
local function head_band(root, g)
  local head = redis.call('ZRANGE', lane_of(root, g), 0, 0, 'WITHSCORES')
  return 5 - tonumber(head[2] or '0')
end

-- The band whose ring holds g now, or nil when g is on no ring.
local function ring_band(root, g)
  local p = redis.call('HGET', root .. 'gband', g)
  if p then return tonumber(p) end
  if redis.call('LPOS', root .. 'ring', g) then return 5 end
  return nil
end

-- The ring-weight counters (`ringweight`: a sharded queue's workers visit each shard in
-- proportion to its active weight, docs/concepts/shards.md): per band p, own:<p> sums the own
-- weights (gweight) of the lanes on p's ring that have one, count:<p> counts those on the
-- default weight, so a change of the default writes nothing. g joined band p's ring (`sign`
-- 1) or left it (-1); a field back at 0 goes, so a queue with no ringed lane has no key.
-- `own`: g's gweight when the caller read it already (false: none), nil to read it here.
local function ring_count(root, g, p, sign, own)
  local key, w = root .. 'ringweight', own
  if w == nil then w = redis.call('HGET', root .. 'gweight', g) end
  local field = w and 'own:' .. p or 'count:' .. p
  if redis.call('HINCRBY', key, field, sign * (w or 1)) == 0 then
    redis.call('HDEL', key, field)
  end
end

-- Put g (on no ring) at the tail of band p's ring.
local function ring_join(root, g, p)
  ring_count(root, g, p, 1)
  if p == 5 then
    redis.call('RPUSH', root .. 'ring', g)
    return
  end
  redis.call('RPUSH', root .. 'band:' .. p .. ':ring', g)
  redis.call('HSET', root .. 'gband', g, p)
  local meta = root .. 'meta'
  local bands = redis.call('HGET', meta, 'bands') or ''
  if not string.find(bands, tostring(p), 1, true) then
    local digits = {p}
    for d in string.gmatch(bands, '%d') do digits[#digits + 1] = tonumber(d) end
    table.sort(digits, function(a, b) return a > b end)
    redis.call('HSET', meta, 'bands', table.concat(digits))
  end
end

-- Take g off `ring` (a band's ring, `turn` its turn). A lane leaving mid-turn forfeits the
-- rest of its turn, so a stale `turn` count cannot shorten its next visit. Returns whether g
-- was on it.
local function leave(ring, turn, g)
  if redis.call('LREM', ring, 0, g) == 0 then return false end
  if redis.call('HGET', turn, 'group') == g then redis.call('DEL', turn) end
  return true
end

-- Take g off band p's ring (nothing when it is not on it).
local function ring_leave(root, g, p)
  local was
  if p == 5 then
    was = leave(root .. 'ring', root .. 'turn', g)
  else
    redis.call('HDEL', root .. 'gband', g)
    was = leave(root .. 'band:' .. p .. ':ring', root .. 'band:' .. p .. ':turn', g)
  end
  if was then ring_count(root, g, p, -1) end
end

-- The bands a claim walks, most urgent first: those of meta `bands` (`text`, as read) and the
-- default. Returns the list and the set of its members.
local function bands_in_use(text)
  local bands, listed = {}, {}
  for p in string.gmatch(text or '', '%d') do
    p = tonumber(p)
    if p < 5 and not listed[5] then
      bands[#bands + 1], listed[5] = 5, true
    end
    bands[#bands + 1], listed[p] = p, true
  end
  if not listed[5] then
    bands[#bands + 1], listed[5] = 5, true
  end
  return bands, listed
end

-- Whether the ring of any band of `bands` holds a lane.
local function any_ringed(root, bands)
  for _, p in ipairs(bands) do
    if p == 5 then
      if redis.call('LLEN', root .. 'ring') > 0 then return true end
    elseif redis.call('LLEN', root .. 'band:' .. p .. ':ring') > 0 then
      return true
    end
  end
  return false
end

-- Take g off whichever ring holds it.
local function dering(root, g)
  local p = redis.call('HGET', root .. 'gband', g)
  ring_leave(root, g, p and tonumber(p) or 5)
end

-- Lane g's head job may have changed band (a job joined or left the lane): a lane on a ring
-- moves to the tail of its head's band's ring.
local function reband(root, g)
  local at = ring_band(root, g)
  if not at then return end
  local p = head_band(root, g)
  if p ~= at then
    ring_leave(root, g, at)
    ring_join(root, g, p)
  end
end

-- Restore the law "on the ring of its head's band iff serviceable" for g after any change that
-- may affect it: ring it (with a wake token) when it became serviceable or changed band,
-- de-ring it when it stopped.
local function rering(root, g, now)
  if serviceable(root, g) then
    local at, p = ring_band(root, g), head_band(root, g)
    if at == p then return end
    if at then ring_leave(root, g, at) end
    ring_join(root, g, p)
    wake(root)
  else
    dering(root, g)
    if now then bench(root, g, now) end
  end
end

-- End lane g's cool now (uncool, resume): it rejoins the ring if serviceable, or is benched
-- for its rate window. Returns 1 when it was cooling, else 0.
local function uncool_lane(root, g, now)
  local was = lane_cool_wait(root, g, now) > 0 and 1 or 0
  if was == 1 then
    redis.call('HDEL', root .. 'cooling', g)
    redis.call('ZREM', root .. 'rdue', g)
    rering(root, g, now)
  end
  return was
end

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
-- anywhere costs one HGET and one EXISTS in all (enqueue.lua).
local function cap_reader(root)
  local caps, default, any = {}, false, nil
  return function(g)
    if any == nil then
      default = redis.call('HGET', root .. 'meta', 'dcap')
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

-- A dedup key counted from the job's end (the row's `dedup_after`, ms, from enqueue.lua): the
-- job ended (completed, dead, cancelled or removed), so the key, if it still points at the
-- job, lives `dedup_after` ms from now, indexed in `dedups` like a TTL from enqueue (expired
-- members trimmed here too: an app whose keys all count from the end still bounds it). The row
-- then records it as `dedup_ttl` (a TTL of its own: the rules below leave it alone, and a
-- second end does not restart it); reprocess.lua takes it back.
local function dedup_window(root, id, row, dedup)
  local f = redis.call('HMGET', row, 'dedup_after', 'dedup_ttl')
  if not f[1] or f[2] then return end
  redis.call('HSET', row, 'dedup_ttl', f[1])
  local key = root .. 'de:' .. dedup
  if redis.call('GET', key) == id then
    local now = now_ms()
    redis.call('PEXPIRE', key, f[1])
    redis.call('ZADD', root .. 'dedups', now + tonumber(f[1]), dedup)
    redis.call('ZREMRANGEBYSCORE', root .. 'dedups', '-inf', now - 1)
  end
end

-- Delete a job's row and release its producer dedup key if that still points at it and lives
-- as long as the row. A key with a TTL of its own (the row has `dedup_ttl`, from enqueue, or
-- from the job's end: dedup_window) lives for that TTL whatever happens to its job;
-- `everything` (obliterate) releases it too.
local function delete_row(root, id, row, dedup, everything)
  if dedup then
    if not everything then dedup_window(root, id, row, dedup) end
    local key = root .. 'de:' .. dedup
    if redis.call('GET', key) == id
        and (everything or redis.call('HEXISTS', row, 'dedup_ttl') == 0) then
      redis.call('DEL', key)
    end
  end
  -- The job's log, and a flow parent's children's results, live as long as its row.
  redis.call('DEL', row, log_of(root, id), root .. 'flow:' .. id .. ':results',
    root .. 'flow:' .. id .. ':failed')
end

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

-- Keep a finished row `ttl` ms (> 0, the queue's result_ttl): the row and its log expire then,
-- its id is in `done` until then, scored by that expiry (so the admin verbs find it), and a
-- dedup key pointing at it lives as long (NX: a key with a TTL of its own keeps it). `batch`
-- (optional): a list that takes the `done` member (score, id) for the caller to add.
local function keep_row(root, id, row, dedup, ttl, now, batch)
  redis.call('PEXPIRE', row, ttl)
  -- The log and a flow parent's children's results go with the row (if it has them: most rows
  -- have none, and one EXISTS costs less than three PEXPIREs).
  local log, results, failed = log_of(root, id), root .. 'flow:' .. id .. ':results',
    root .. 'flow:' .. id .. ':failed'
  if redis.call('EXISTS', log, results, failed) > 0 then
    redis.call('PEXPIRE', log, ttl)
    redis.call('PEXPIRE', results, ttl)
    redis.call('PEXPIRE', failed, ttl)
  end
  if batch then
    batch[#batch + 1], batch[#batch + 2] = now + ttl, id
  else
    redis.call('ZADD', root .. 'done', now + ttl, id)
  end
  if dedup then
    dedup_window(root, id, row, dedup)
    local key = root .. 'de:' .. dedup
    if redis.call('GET', key) == id then redis.call('PEXPIRE', key, ttl, 'NX') end
  end
end

-- End a detached job as cancelled: kept `ttl` ms as state `cancelled` with its reason
-- (`cancel`) and `finished` (server ms), like a completed row (keep_row), or deleted at ttl 0;
-- counted in metrics:cancelled. The caller announces it on `done`. A flow child's parent is
-- told it failed ("cancelled: <reason>"), under the child's policy, so it never waits forever.
local function end_cancelled(root, id, row, dedup, reason, ttl, now)
  child_settled(root, id, row, false, 'cancelled: ' .. reason)
  if ttl == 0 then
    delete_row(root, id, row, dedup)
  else
    redis.call('HSET', row, 'state', 'cancelled', 'cancel', reason, 'finished', now)
    redis.call('HDEL', row, 'reaped', 'cancel_ttl')
    keep_row(root, id, row, dedup, ttl, now)
  end
  redis.call('HINCRBY', root .. 'metrics:cancelled', 'count', 1)
end

-- End a detached job that a cancel marked while it was leased (its `cancel` reason and the
-- canceller's `cancel_ttl`): a failure, a deferral or an expired lease of a job asked to stop
-- is not run again (retry, delay, reap).
local function end_marked(root, id, row, dedup, reason, now)
  local ttl = tonumber(redis.call('HGET', row, 'cancel_ttl') or '0')
  end_cancelled(root, id, row, dedup, reason, ttl, now)
end

-- Dead-letter a job whose row is already detached: `finished` is the server ms of death, and
-- `traceback` the failed attempt's (nil or "" for none: an older attempt's is dropped).
-- Its dedup key: one counted from the end starts its window (dedup_window); one that lived
-- as long as the row is released (a dead row is kept to be read, not as work done: the same
-- work may be enqueued again); one with a TTL from enqueue runs it out.
local function bury(root, id, row, err, now, traceback)
  local dedup = redis.call('HGET', row, 'dedup')
  if dedup then
    dedup_window(root, id, row, dedup)
    local key = root .. 'de:' .. dedup
    if redis.call('HEXISTS', row, 'dedup_ttl') == 0 and redis.call('GET', key) == id then
      redis.call('DEL', key)
    end
  end
  if traceback and traceback ~= '' then
    redis.call('HSET', row, 'state', 'dead', 'last_error', err, 'finished', now,
      'traceback', traceback)
  else
    redis.call('HSET', row, 'state', 'dead', 'last_error', err, 'finished', now)
    redis.call('HDEL', row, 'traceback')
  end
  redis.call('ZADD', root .. 'dead', now, id)
  redis.call('HINCRBY', root .. 'metrics:failed', 'count', 1)
  child_settled(root, id, row, false, err) -- a flow's child: its parent learns of the death
end

-- Tell waiters (Queue.wait) that jobs finished, completed or dead, or that their rows were
-- deleted: one `SPUBLISH done <id>` each, on the shard channel named like the `done` index
-- (same slot, so cluster-legal); a waiter re-reads its row on its id. For
-- several ids it asks first whether anyone subscribes: nobody waiting then costs one call per
-- script, not one per job; one id is published at once (a publish costs less than the
-- question). Race-free: a waiter subscribes before it reads the row.
local function announce(root, ids)
  if #ids == 0 then return end
  local channel = root .. 'done'
  if #ids > 1 and redis.call('PUBSUB', 'SHARDNUMSUB', channel)[2] == 0 then return end
  for _, id in ipairs(ids) do redis.call('SPUBLISH', channel, id) end
end

-- Tell every waiter of the queue to re-read its row: the wildcard message `*` on the `done`
-- channel (no job id is one character), one publish however many rows went (obliterate).
local function announce_all(root)
  redis.call('SPUBLISH', root .. 'done', '*')
end

-- Tell waiters that the rows of `ids` were deleted (remove, drain): one message per id, as
-- `announce`, or past 100 ids the one wildcard (announce_all). A waiter finding no row answers
-- None, so no wait outlives its row.
local function announce_deleted(root, ids)
  if #ids > 100 then announce_all(root) else announce(root, ids) end
end

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

-- Measured claim rates, for ETAs (eta.lua reads them). The claim counts what it leased in
-- `served` (HINCRBY: the queue's under "", each lane's under its name) and every FOLD_EVERY
-- claims folds the counts into `rates`: per field "rate:at:since", rate an exponentially
-- decayed count of claims in claims/s (time constant 5 s: eta.SERVED_TAU) as of server ms
-- `at`, since the ms this spell of claiming began (a minute without claims starts a new one).
-- The queue's `at` is when the counts in `served` began: they are spread evenly from it.
-- One HINCRBY per lane served, and the fold's few commands once per FOLD_EVERY claims.
local function rate_after(old, now, last, n)
  local rate, since = 0, last
  if old then
    local r, at, from = string.match(old, '^([^:]+):([^:]+):([^:]+)$')
    if now - tonumber(at) < 60000 then
      rate, since = tonumber(r) * math.exp((tonumber(at) - now) / 5000), tonumber(from)
    end
  end
  local span = (now - last) / 1000
  if span > 0 then
    rate = rate + n / span * (1 - math.exp(-span / 5))
  else
    rate = rate + n / 5
  end
  -- string.format, not `..`: a number's tostring costs ten times as much.
  return string.format('%.6g:%d:%d', rate, now, since)
end

local function count_claims(root, now, taken)
  local served, rates = root .. 'served', root .. 'rates'
  local total = redis.call('HINCRBY', served, '', taken)
  if total == taken then
    -- The first count since the last fold: the counts begin now (nothing was claimed since
    -- the fold), so the queue's rate is carried to now, its `at` the counts' start.
    redis.call('HSET', rates, '', rate_after(redis.call('HGET', rates, ''), now, now, 0))
  end
  if total < 64 then return end -- FOLD_EVERY
  local counts = redis.call('HGETALL', served)
  redis.call('DEL', served)
  local names = {}
  for i = 1, #counts, 2 do names[#names + 1] = counts[i] end
  local last = tonumber(string.match(redis.call('HGET', rates, '') or '', '^[^:]+:([^:]+)'))
  local old = redis.call('HMGET', rates, unpack(names))
  local out = {}
  for i, name in ipairs(names) do
    out[#out + 1] = name
    out[#out + 1] = rate_after(old[i], now, last or now, tonumber(counts[2 * i]))
  end
  redis.call('HSET', rates, unpack(out))
  -- A few fields at random a minute old go, so the hash holds about the lanes served lately.
  local picked = redis.call('HRANDFIELD', rates, 4, 'WITHVALUES')
  for i = 1, #picked, 2 do
    if now - tonumber(string.match(picked[i + 1], '^[^:]+:([^:]+)')) >= 60000 then
      redis.call('HDEL', rates, picked[i])
    end
  end
end
