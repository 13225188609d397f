-- lane_move_in.lua: on a lane's target shard, import what lane_move_out.lua exported from its
-- source (a lane move, docs/concepts/shards.md "Moving a lane", step 4). The lane is held here
-- (`adopted` names its source) until the release, so nothing imported is served before it.
-- After the release (`adopted[lane] = ""`) jobs alone are imported: flow parents that joined
-- the lane on the source since (the mover's follow step); the lane joins the ring if
-- serviceable. Idempotent: a row imported again replaces its first import, in the lane or the
-- schedule.
-- KEYS[1] root   `emq:{q~k}:` (the target shard)
-- ARGV[1] group  the lane
-- ARGV[2] kind   "state" or "jobs"
-- state:  ARGV[3] n, then n/2 field, value pairs (lane_move_out's state: each field absent
--         there is cleared here), then the sliding log's entries (its claims)
-- jobs:   per job: id, "lane" | "schedule", score, n, n/2 row field, value pairs, m, m log
--         lines, dedup ttl (ms; -1 no expiry; -3 no key to write)
-- Returns the jobs (or state fields) imported.
-- Errors  EMQSTATE the lane is neither held here (adopt it first: lane_adopt.lua) nor, for
--         jobs, released here by a move.
local root, g, kind = KEYS[1], ARGV[1], ARGV[2]
local from = redis.call('HGET', root .. 'adopted', g)
if not from or (from == '' and kind ~= 'jobs') then
  return redis.error_reply('EMQSTATE lane ' .. g .. ' is not held here for a move')
end

if kind == 'state' then
  local n = int_arg(ARGV[3], 'n', 0, 64)
  local state = {}
  for i = 4, 3 + n, 2 do state[ARGV[i]] = ARGV[i + 1] end
  local function put(key, value)
    if value then redis.call('HSET', key, g, value) else redis.call('HDEL', key, g) end
  end
  put(root .. 'glimit', state.glimit)
  put(root .. 'gweight', state.gweight)
  put(root .. 'grate', state.grate)
  put(root .. 'gcap', state.gcap)
  put(root .. 'policies', state.policy)
  put(root .. 'cooling', state.cooling)
  put(root .. 'holders', state.holder)
  if state.paused then
    redis.call('SADD', root .. 'paused', g)
  else
    redis.call('SREM', root .. 'paused', g)
  end
  local limiter, log = lane_limiter_of(root, g), lane_claims_of(root, g)
  redis.call('DEL', limiter, log)
  local ttl = tonumber(state.limiter_ttl or '-2')
  if state.limiter and ttl > 0 then redis.call('SET', limiter, state.limiter, 'PX', ttl) end
  if #ARGV > 3 + n then
    redis.call('RPUSH', log, unpack(ARGV, 4 + n))
    ttl = tonumber(state.claims_ttl or '-2')
    if ttl > 0 then redis.call('PEXPIRE', log, ttl) end
  end
  return n / 2
end
if kind ~= 'jobs' then
  return redis.error_reply('EMQARG kind ' .. tostring(kind) .. ': must be state or jobs')
end

local lane, now, imported, costmax = lane_of(root, g), nil, 0, 0
local i = 3
while i <= #ARGV do
  local id, where, score = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  local n = int_arg(ARGV[i + 3], 'n', 2, 200)
  local row = root .. 'job:' .. id
  -- A row imported before (as scheduled, promoted since on the source) leaves its old place.
  if redis.call('ZREM', root .. 'schedule', id) == 1 then scheduled_moved(root, g, -1) end
  redis.call('ZREM', lane, id)
  redis.call('DEL', row, log_of(root, id))
  redis.call('HSET', row, unpack(ARGV, i + 4, i + 3 + n))
  i = i + 4 + n
  local m = int_arg(ARGV[i], 'm', 0, 1000)
  if m > 0 then redis.call('RPUSH', log_of(root, id), unpack(ARGV, i + 1, i + m)) end
  i = i + m + 1
  local ttl = int_arg(ARGV[i], 'dedup ttl', -3, 315360000000)
  i = i + 1
  local fields = redis.call('HMGET', row, 'dedup', 'cost')
  if fields[1] and ttl ~= -3 then
    local key = root .. 'de:' .. fields[1]
    if ttl > 0 then
      now = now or now_ms()
      redis.call('SET', key, id, 'PX', ttl)
      redis.call('ZADD', root .. 'dedups', now + ttl, fields[1])
    else
      redis.call('SET', key, id)
    end
  end
  if fields[2] then costmax = math.max(costmax, tonumber(fields[2])) end
  if where == 'lane' then
    redis.call('ZADD', lane, score, id)
    redis.call('SADD', root .. 'lanes', g)
    if tonumber(score) ~= 0 then redis.call('HSET', root .. 'meta', 'banded', 1) end
  else
    redis.call('ZADD', root .. 'schedule', score, id)
    scheduled_moved(root, g, 1)
  end
  imported = imported + 1
end
-- The marks the claim reads before it walks bands or reads costs (enqueue.lua writes them).
if costmax > tonumber(redis.call('HGET', root .. 'meta', 'costed') or '0') then
  redis.call('HSET', root .. 'meta', 'costed', costmax)
end
-- Released here already: the lane is served, so it joins the ring if serviceable.
if from == '' then rering(root, g, now_ms()) end
-- Token "s": an idle consumer learns the schedule's new due time from an upkeep.
redis.call('LPUSH', root .. 'wake', 's')
redis.call('LTRIM', root .. 'wake', 0, 63)
return imported
