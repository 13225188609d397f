-- drain.lua: delete pending jobs (of one lane, or every lane), optionally scheduled ones and
-- kept results (completed rows) too. Leased and dead jobs, lane settings and counters survive.
-- Bounded: call again while it answers more.
-- KEYS[1] root      `emq:{q}:`
-- ARGV[1] group     one lane, or "" for every lane
-- ARGV[2] schedule  1 = also delete scheduled jobs (whole-queue drain only)
-- ARGV[3] budget    most jobs to delete in this call; > 0
-- ARGV[4] results   1 = also delete kept results (whole-queue drain only)
-- Returns {deleted, more (1 = call again)}.
local root, only, with_schedule = KEYS[1], ARGV[1], ARGV[2] == '1'
local budget = int_arg(ARGV[3], 'budget', 1, 10000)
local with_results = int_arg(ARGV[4], 'results', 0, 1) == 1
local deleted = 0

local function sweep(set, ids)
  for _, id in ipairs(ids) do
    redis.call('ZREM', set, id)
    local row = root .. 'job:' .. id
    delete_row(root, id, row, redis.call('HGET', row, 'dedup'))
    deleted = deleted + 1
  end
end

local groups = {only}
if only == '' then groups = redis.call('SMEMBERS', root .. 'lanes') end
for _, g in ipairs(groups) do
  if deleted >= budget then return {deleted, 1} end
  local lane = lane_of(root, g)
  sweep(lane, redis.call('ZRANGE', lane, 0, budget - deleted - 1))
  lane_shrank(root, g)
end
if with_schedule and only == '' and deleted < budget then
  local schedule = root .. 'schedule'
  sweep(schedule, redis.call('ZRANGE', schedule, 0, budget - deleted - 1))
  if redis.call('EXISTS', schedule) == 1 then return {deleted, 1} end
end
if with_results and only == '' and deleted < budget then
  local done = root .. 'done'
  sweep(done, redis.call('ZRANGE', done, 0, budget - deleted - 1))
  if redis.call('EXISTS', done) == 1 then return {deleted, 1} end
end
if only ~= '' then
  return {deleted, redis.call('EXISTS', lane_of(root, only))}
end
return {deleted, redis.call('SCARD', root .. 'lanes') > 0 and 1 or 0}
