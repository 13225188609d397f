-- lane_move_out.lua: on a lane's source shard, freeze the lane and export a batch of it (a lane
-- move, docs/concepts/shards.md "Moving a lane", steps 2 to 4). Idempotent: the mover calls it
-- again for each batch, and after a crash.
-- KEYS[1] root   `emq:{q~k}:` (the source shard)
-- ARGV[1] group  the lane
-- ARGV[2] to     the target shard's index, 0..4095
-- ARGV[3] batch  most jobs to export, 0..1000 (0: freeze and report the leases alone)
-- ARGV[4] from   where this batch's look at the schedule starts: a rank, 0..2^53 (the last
--                batch's answer; absent: 0)
-- Freezing: `moved[lane] = to` (the fence refuses the lane's enqueues toward `to`), `adopted`
-- forgets it (this shard had adopted it in an earlier move), and the lane leaves the ring and
-- `rdue`; serviceable() keeps it off while `moved` names it, so no promote, reap or release
-- rings it again. Its leased jobs settle here as usual (a retry lands in the schedule).
-- Returns {leased, state, claims, jobs, next, scheduled}:
--   leased  the lane's leased jobs (gactive): the mover copies nothing before it is 0
--   state   field, value pairs of the lane's state, those present: glimit, gweight, grate,
--           gcap, policy (its JSON), paused ("1"), cooling (server ms), holder (an ordered
--           lane's), limiter (the fixed window's count) and limiter_ttl, claims_ttl (ms)
--   claims  the sliding log (server ms of the lane's newest claims, oldest first)
--   jobs    up to `batch` pending jobs (the lane's head first), then up to `batch` scheduled
--           ones, found by the row's group among the schedule's SCAN entries from rank `from`
--           on, each {id, "lane" | "schedule", score, row (field, value pairs), log lines,
--           dedup ttl}
--   next    the rank the next batch's look starts at, or -1 once past the end (start again
--           at 0: a deleted or promoted entry shifts the ranks, so the mover goes round until
--           `scheduled` is 0)
--   scheduled  the lane's jobs still in the schedule here (gscheduled)
-- Each call reads at most SCAN schedule entries, so a large schedule costs a move many calls,
-- none of them long.
--           (dedup ttl: ms, -1 none, -3 when the job has no dedup key that still names it)
-- Dead jobs stay here (reprocessed, one goes to the lane's shard: dead_move.lua), as do kept
-- results.
local root, g = KEYS[1], ARGV[1]
local to = int_arg(ARGV[2], 'to', 0, 4095)
local batch = int_arg(ARGV[3], 'batch', 0, 1000)
local from = int_arg(ARGV[4] or '0', 'from', 0, 9007199254740991)
local SCAN = 1000

redis.call('HSET', root .. 'moved', g, to)
redis.call('HDEL', root .. 'adopted', g)
dering(root, g)
redis.call('ZREM', root .. 'rdue', g)

local state = {}
local function keep(field, value)
  if value then state[#state + 1], state[#state + 2] = field, value end
end
keep('glimit', redis.call('HGET', root .. 'glimit', g))
keep('gweight', redis.call('HGET', root .. 'gweight', g))
keep('grate', redis.call('HGET', root .. 'grate', g))
keep('gcap', redis.call('HGET', root .. 'gcap', g))
keep('policy', redis.call('HGET', root .. 'policies', g))
if redis.call('SISMEMBER', root .. 'paused', g) == 1 then keep('paused', '1') end
keep('cooling', redis.call('HGET', root .. 'cooling', g))
keep('holder', redis.call('HGET', root .. 'holders', g))
local limiter = lane_limiter_of(root, g)
keep('limiter', redis.call('GET', limiter))
keep('limiter_ttl', tostring(redis.call('PTTL', limiter)))
local log = lane_claims_of(root, g)
local claims = redis.call('LRANGE', log, 0, -1)
keep('claims_ttl', tostring(redis.call('PTTL', log)))

local jobs = {}
local function export(id, where, score)
  local row = root .. 'job:' .. id
  local dedup, ttl = redis.call('HGET', row, 'dedup'), -3
  if dedup and redis.call('GET', root .. 'de:' .. dedup) == id then
    ttl = redis.call('PTTL', root .. 'de:' .. dedup)
  end
  jobs[#jobs + 1] = {id, where, score, redis.call('HGETALL', row),
    redis.call('LRANGE', log_of(root, id), 0, -1), ttl}
end
if batch > 0 then
  local heads = redis.call('ZRANGE', lane_of(root, g), 0, batch - 1, 'WITHSCORES')
  for i = 1, #heads, 2 do export(heads[i], 'lane', heads[i + 1]) end
end
local next_from = -1
local left = tonumber(redis.call('HGET', root .. 'gscheduled', g) or '0')
if batch > 0 and left > 0 then
  local found = 0
  local due = redis.call('ZRANGE', root .. 'schedule', from, from + SCAN - 1, 'WITHSCORES')
  -- The entries exported now leave the schedule (once deleted): the ranks after them shift.
  next_from = #due == 2 * SCAN and from + SCAN or -1
  for i = 1, #due, 2 do
    if found >= batch then
      next_from = from + (i - 1) / 2
      break
    end
    if (redis.call('HGET', root .. 'job:' .. due[i], 'group') or '_') == g then
      export(due[i], 'schedule', due[i + 1])
      found = found + 1
    end
  end
  if next_from >= 0 then next_from = math.max(0, next_from - found) end
end
return {tonumber(redis.call('HGET', root .. 'gactive', g) or '0'), state, claims, jobs,
  next_from, left}
