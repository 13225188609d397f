-- complete.lua: jobs succeeded; delete their rows, or keep them as results for a while.
-- One call settles k jobs (k >= 1), each fenced by its own token and settled on its own.
-- KEYS[1] root   `emq:{q}:`
-- ARGV[1]        ttl: ms a completed row is kept, 0 = delete it (the queue's result_ttl);
--                at most 30 days. A row with a `result_ttl` of its own (enqueue.lua: its
--                task's) is kept that long instead.
-- ARGV[4i-2] .. ARGV[4i+1]  id, token (the attempts value the claim returned), result (the
--                codec's bytes: kept on the row when ttl > 0, handed to the job's flow parent
--                when it has one, tell_parent in _parents.lua, else unused) and ran (ms its handler
--                ran, as its consumer measured it; 0 = unmeasured: fairness by time then
--                charges the time the lease was held, charge_time in _fair.lua) of job i
-- A kept row reads state=completed, result, finished (server ms); it expires after ttl ms and
-- its id is in `done` until then, scored by the ms the row expires (finished + ttl), so the
-- admin verbs find it whatever ttl other consumers of the queue keep rows for; each call trims
-- a bounded number of members whose rows expired (score < now). A dedup key pointing at the
-- job lives as long as the row (deleted with it at ttl 0, else given the row's ttl), unless it
-- has a TTL of its own: then it lives for that, counted from enqueue or, when the row counts
-- it from the end (`dedup_after`), from now (dedup_window in _ends.lua).
-- The job's log (`log:<id>`) is deleted with the row, or given the kept row's expiry
-- (keep_row in _ends.lua). A job a cancel marked while it ran completes all the same: its
-- handler finished before the holder heard the cancel (cancel.lua).
-- Each completed id is announced on the shard channel `done` (announce in _ends.lua).
-- Returns one code per job, in order: 1 completed (3: and its flow parent, on another queue,
-- has an entry in this queue's outbox: a relay is due), 0 gone (no such row), -1 stale (the row
-- moved on: another claim holds it), -2 settled (this claim settled the job already: retried,
-- delayed or dead). The settle rule is `holding` in _settle.lua. The ttl, every token and every
-- result's size (16 MiB) are checked (EMQARG) before the first write.
local root = KEYS[1]
local ttl = int_arg(ARGV[1], 'ttl', 0, 2592000000)
for i = 3, #ARGV, 4 do
  token_arg(ARGV[i])
  if #ARGV[i + 1] > 16777216 then
    return redis.error_reply('EMQARG result <' .. #ARGV[i + 1] ..
      ' bytes>: must be at most 16777216 bytes')
  end
  int_arg(ARGV[i + 2], 'ran', 0, 2592000000)
end
local now = ttl > 0 and now_ms() or nil
local out, finished = {}, {}
-- The queue's settings, read once per call (detach reads them per job). A leased job of an
-- unordered queue leaves `active` and its lane's count in flight in one batch per call: the
-- ids are collected, and flush() removes them with one ZMSCORE and one ZREM and releases each
-- lane once (one HINCRBY, one ceiling read, one rering when the lane may have room now), as
-- detach would job by job. The batch is flushed before anything else reads those counts (a
-- flow parent told, a job detached the slow way) and at the end. A call of one job detaches
-- it as it is (the batch's tables and reads would cost it more than they save).
local cfg = #ARGV > 5
  and redis.call('HMGET', root .. 'meta', 'concurrency', 'ordered', 'dlimit', 'costed')
local active, leaving, lane_of_job, cost_of_job = root .. 'active', {}, {}, {}
local function flush()
  if #leaving == 0 then return end
  local ceiling = tonumber(cfg[1] or '0')
  local before = ceiling > 0 and redis.call('ZCARD', active) or 0
  local scores, gone, lanes = redis.call('ZMSCORE', active, unpack(leaving)), {}, {}
  for i, id in ipairs(leaving) do
    if scores[i] then -- else not leased after all: nothing to release (as detach)
      local g = lane_of_job[i]
      gone[#gone + 1] = id
      extra_moved(root, g, cost_of_job[i], -1)
      if not lanes[g] then lanes[g], lanes[#lanes + 1] = 0, g end
      lanes[g] = lanes[g] + 1
    end
  end
  if #gone > 0 then redis.call('ZREM', active, unpack(gone)) end
  for _, g in ipairs(lanes) do
    local was = release(root, g, lanes[g])
    local limit = redis.call('HGET', root .. 'glimit', g) or cfg[3]
    if limit and (cfg[4] or was >= tonumber(limit)) then rering(root, g) end
  end
  -- A slot under the queue's ceiling freed up: a wake per job that left at or over it.
  if ceiling > 0 then
    for _ = 1, math.min(#gone, before - ceiling + 1) do wake(root) end
  end
  leaving, lane_of_job, cost_of_job = {}, {}, {}
end
local kept = {} -- `done` members to add, score then id (keep_row)
local function add_kept()
  if #kept > 0 then redis.call('ZADD', root .. 'done', unpack(kept)) end
  kept = {}
end

for i = 2, #ARGV, 4 do
  local id = ARGV[i]
  local row = root .. 'job:' .. id
  local fields, refusal = holding(row, ARGV[i + 1])
  if fields then
    if fields[10] and fields[2] == 'active' then
      -- Fairness by time: charged by the handler's time, not the lease's (as detach would).
      charge_time(root, fields[3] or '_', fields[10], tonumber(ARGV[i + 3]))
      fields[10] = nil
    end
    if cfg and fields[2] == 'active' and not cfg[2] then
      local n = #leaving + 1
      leaving[n], lane_of_job[n], cost_of_job[n] = id, fields[3] or '_', fields[9]
      if n == 1000 then flush() end -- unpack takes a bounded number of values
    else
      flush()
      detach(root, id, fields)
    end
    local relayed = false
    if fields[7] then
      flush()
      relayed = child_settled(root, id, row, true, ARGV[i + 2])
    end
    local keep = tonumber(fields[8] or ttl)
    if keep == 0 then
      delete_row(root, id, row, fields[4])
    else
      now = now or now_ms()
      redis.call('HSET', row, 'state', 'completed', 'result', ARGV[i + 2], 'finished', now)
      keep_row(root, id, row, fields[4], keep, now, kept)
      if #kept == 2000 then add_kept() end
    end
    finished[#finished + 1] = id
    out[#out + 1] = relayed and 3 or 1
  elseif refusal == 'stale' then
    out[#out + 1] = -1
  elseif refusal == 'settled' then
    out[#out + 1] = -2
  else
    out[#out + 1] = 0
  end
end
flush()
if #finished > 0 then
  redis.call('HINCRBY', root .. 'metrics:completed', 'count', #finished)
  if now then
    add_kept()
    local done = root .. 'done'
    -- Rows whose expiry passed are gone by themselves; forget their ids, a bounded number per
    -- call (more than a chunk adds, so the index cannot outgrow the kept rows for long). A row
    -- is still readable in the ms it expires at, hence the exclusive bound.
    local old = redis.call('ZRANGE', done, '-inf', '(' .. now, 'BYSCORE', 'LIMIT', 0, 200)
    if #old > 0 then redis.call('ZREM', done, unpack(old)) end
  end
  announce(root, finished)
end
return out
