-- lane_move_drop.lua: on a lane's source shard, delete what the target imported (a lane move,
-- docs/concepts/shards.md "Moving a lane", step 4): only rows still as they were copied, so a
-- job that changed since (a scheduled job promoted into the lane) stays for the next batch.
-- KEYS[1] root   `emq:{q~k}:` (the source shard)
-- ARGV[1] group  the lane
-- ARGV[2] kind   "jobs" or "state"
-- jobs:   id, "lane" | "schedule", score, attempts per job, as exported
-- state:  once the source holds none of the lane's jobs (pending, leased, scheduled), its
--         state goes: settings, policy, pause, cooling, holder, credit, rate log and counter
-- Returns jobs: the ids deleted; state: 1 deleted, 0 the lane still has jobs here.
-- Errors  EMQSTATE the lane is not frozen here (lane_move_out.lua first).
local root, g, kind = KEYS[1], ARGV[1], ARGV[2]
if redis.call('HEXISTS', root .. 'moved', g) == 0 then
  return redis.error_reply('EMQSTATE lane ' .. g .. ' is not frozen here for a move')
end

if kind == 'state' then
  if redis.call('ZCARD', lane_of(root, g)) > 0 or redis.call('HEXISTS', root .. 'gactive', g) == 1
      or redis.call('HEXISTS', root .. 'gscheduled', g) == 1 then
    return 0
  end
  for _, key in ipairs({root .. 'glimit', root .. 'gweight', root .. 'grate', root .. 'gcap',
      root .. 'policies', root .. 'cooling', root .. 'holders', root .. 'gdeficit',
      root .. 'grun'}) do
    redis.call('HDEL', key, g)
  end
  redis.call('SREM', root .. 'paused', g)
  redis.call('ZREM', root .. 'rdue', g)
  redis.call('DEL', lane_limiter_of(root, g), lane_claims_of(root, g))
  return 1
end
if kind ~= 'jobs' then
  return redis.error_reply('EMQARG kind ' .. tostring(kind) .. ': must be jobs or state')
end

local dropped = {}
for i = 3, #ARGV, 4 do
  local id, where, score, attempts = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
  local row = root .. 'job:' .. id
  local fields = read_row(row)
  local at
  if where == 'lane' then
    at = redis.call('ZSCORE', lane_of(root, g), id)
  else
    at = redis.call('ZSCORE', root .. 'schedule', id)
  end
  if fields[2] == (where == 'lane' and 'pending' or 'scheduled') and (fields[3] or '_') == g
      and fields[1] == attempts and at and tonumber(at) == tonumber(score) then
    detach(root, id, fields)
    delete_row(root, id, row, fields[4], true)
    dropped[#dropped + 1] = id
  end
end
return dropped
