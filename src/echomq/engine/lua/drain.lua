-- drain.lua: delete pending jobs (of one lane, or every lane, with the flow parents waiting
-- for children), optionally scheduled ones and kept results (completed rows) too. Leased and
-- dead jobs, lane settings and counters survive.
-- Bounded: call again while it answers more.
-- KEYS[1] root      `emq:{q}:`
-- ARGV[1] group     one lane, or "" for every lane
-- ARGV[2] schedule  1 = also delete scheduled jobs (whole-queue drain only)
-- ARGV[3] budget    most jobs to delete in this call; > 0
-- ARGV[4] results   1 = also delete kept results (whole-queue drain only)
-- Returns {deleted, more (1 = call again)}.
-- The deleted ids are announced on the shard channel `done`, so their waits answer None: one
-- message each, or past 100 the one wildcard `*` (announce_deleted in _ends.lua). A dedup key
-- with a TTL of its own outlives its row (delete_row).
local root, only, with_schedule = KEYS[1], ARGV[1], ARGV[2] == '1'
local budget = int_arg(ARGV[3], 'budget', 1, 10000)
local with_results = int_arg(ARGV[4], 'results', 0, 1) == 1
local gone = {}

local function sweep(set, ids, scheduled)
  for _, id in ipairs(ids) do
    redis.call('ZREM', set, id)
    local row = root .. 'job:' .. id
    if scheduled then scheduled_moved(root, redis.call('HGET', row, 'group') or '_', -1) end
    delete_row(root, id, row, redis.call('HGET', row, 'dedup'))
    gone[#gone + 1] = id
  end
end

-- Every answer goes through here, so no deleted row is left unannounced.
local function answer(more)
  announce_deleted(root, gone)
  return {#gone, more}
end

local groups = {only}
if only == '' then groups = redis.call('SMEMBERS', root .. 'lanes') end
for _, g in ipairs(groups) do
  if #gone >= budget then return answer(1) end
  local lane = lane_of(root, g)
  sweep(lane, redis.call('ZRANGE', lane, 0, budget - #gone - 1))
  lane_shrank(root, g)
end
-- A whole-queue drain takes the flow parents waiting for children with it (they would wait
-- for drained children forever): their rows and children's results.
if only == '' and #gone < budget then
  local waiting = root .. 'waiting'
  sweep(waiting, redis.call('ZRANGE', waiting, 0, budget - #gone - 1))
  if redis.call('EXISTS', waiting) == 1 then return answer(1) end
end
if with_schedule and only == '' and #gone < budget then
  local schedule = root .. 'schedule'
  sweep(schedule, redis.call('ZRANGE', schedule, 0, budget - #gone - 1), true)
  if redis.call('EXISTS', schedule) == 1 then return answer(1) end
end
if with_results and only == '' and #gone < budget then
  local done = root .. 'done'
  sweep(done, redis.call('ZRANGE', done, 0, budget - #gone - 1))
  if redis.call('EXISTS', done) == 1 then return answer(1) end
end
if only ~= '' then
  return answer(redis.call('EXISTS', lane_of(root, only)))
end
return answer(redis.call('SCARD', root .. 'lanes') > 0 and 1 or 0)
