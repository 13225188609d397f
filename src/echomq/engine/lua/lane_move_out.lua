-- lane_move_out.lua: on a lane's source shard, freeze the lane and export a batch of it (a lane
-- move, docs/concepts/shards.md "Moving a lane", steps 2 to 4). Idempotent: the mover calls it
-- again for each batch, and after a crash.
-- KEYS[1] root   `emq:{q~k}:` (the source shard)
-- ARGV[1] group  the lane
-- ARGV[2] to     the target shard's index, 0..4095
-- ARGV[3] batch  most jobs to export, 0..1000 (0: freeze and report the leases alone)
-- Freezing: `moved[lane] = to` (the fence refuses the lane's enqueues toward `to`), `adopted`
-- forgets it (this shard had adopted it in an earlier move), and the lane leaves the ring and
-- `rdue`; serviceable() keeps it off while `moved` names it, so no promote, reap or release
-- rings it again. Its leased jobs settle here as usual (a retry lands in the schedule).
-- Returns {leased, state, claims, jobs}:
--   leased  the lane's leased jobs (gactive): the mover copies nothing before it is 0
--   state   field, value pairs of the lane's state, those present: glimit, gweight, grate,
--           gcap, policy (its JSON), paused ("1"), cooling (server ms), holder (an ordered
--           lane's), limiter (the fixed window's count) and limiter_ttl, claims_ttl (ms)
--   claims  the sliding log (server ms of the lane's newest claims, oldest first)
--   jobs    up to `batch` pending jobs (the lane's head first), then up to `batch` scheduled
--           ones (one scan of the schedule, by the row's group), each
--           {id, "lane" | "schedule", score, row (field, value pairs), log lines, dedup ttl}
--           (dedup ttl: ms, -1 none, -3 when the job has no dedup key that still names it)
-- Dead jobs stay here (reprocess on this shard), as do kept results.
local root, g = KEYS[1], ARGV[1]
local to = int_arg(ARGV[2], 'to', 0, 4095)
local batch = int_arg(ARGV[3], 'batch', 0, 1000)

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
  local found, due = 0, redis.call('ZRANGE', root .. 'schedule', 0, -1, 'WITHSCORES')
  for i = 1, #due, 2 do
    if found >= batch then break end
    if (redis.call('HGET', root .. 'job:' .. due[i], 'group') or '_') == g then
      export(due[i], 'schedule', due[i + 1])
      found = found + 1
    end
  end
end
return {tonumber(redis.call('HGET', root .. 'gactive', g) or '0'), state, claims, jobs}
