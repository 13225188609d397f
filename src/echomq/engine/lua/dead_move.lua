-- dead_move.lua: reprocess a dead job on the shard that serves its lane now, when the job sits
-- on a shard its lane has left (docs/concepts/shards.md, "Dead jobs after a move"): the host
-- copies it here ("in", idempotent), then deletes it there ("drop", only as copied).
-- KEYS[1] root   `emq:{q~k}:`
-- ARGV[1] kind   "in" or "drop"
-- in:   ARGV[2] epoch (the producer's placement epoch), ARGV[3] id, ARGV[4] the lane's slot,
--       ARGV[5] dedup ttl (ms, as reprocess.lua's refusal reports it), ARGV[6] n, then n/2 row
--       field, value pairs (the dead row), then its log lines. Fenced as an admission: a lane
--       this shard does not serve is refused EMQMOVED, nothing written. The row is written as
--       reprocess.lua revives one (pending, a fresh failure budget, its dedup key taken back
--       when free) and joins its lane.
-- drop: ARGV[2] id, ARGV[3] attempts as copied: the row is deleted while it is still dead with
--       those attempts (its dedup key too, while it names the job).
-- Returns in: 1 copied, 0 a row of that id is here already (an earlier copy: nothing written);
--         drop: 1 deleted, 0 not (gone, or no longer as copied).
local root, kind = KEYS[1], ARGV[1]

if kind == 'drop' then
  local id = ARGV[2]
  local row = root .. 'job:' .. id
  local fields = redis.call('HMGET', row, 'state', 'attempts', 'dedup')
  if fields[1] ~= 'dead' or fields[2] ~= ARGV[3] then return 0 end
  redis.call('ZREM', root .. 'dead', id)
  delete_row(root, id, row, fields[3], true)
  return 1
end
if kind ~= 'in' then
  return redis.error_reply('EMQARG kind ' .. tostring(kind) .. ': must be in or drop')
end

local id = ARGV[3]
local n = int_arg(ARGV[6], 'n', 2, 200)
local copied = {}
for i = 7, 6 + n, 2 do copied[ARGV[i]] = ARGV[i + 1] end
local g = copied.group or '_'
local moved = fence_reader(root, {'fence', ARGV[2]})(g, ARGV[4])
if moved then return redis.error_reply(moved) end
local row = root .. 'job:' .. id
if redis.call('EXISTS', row) == 1 then return 0 end

redis.call('HSET', row, unpack(ARGV, 7, 6 + n))
if #ARGV > 6 + n then redis.call('RPUSH', log_of(root, id), unpack(ARGV, 7 + n)) end
-- As reprocess.lua: attempts is the fencing token and never goes back; grace resets the count.
redis.call('HDEL', row, 'last_error', 'stalled', 'finished', 'traceback')
redis.call('HSET', row, 'state', 'pending', 'grace', copied.attempts or '0')
if copied.dedup then
  local key, ttl = root .. 'de:' .. copied.dedup, int_arg(ARGV[5], 'dedup ttl', -3, 315360000000)
  local seen = redis.call('GET', key)
  if not seen or seen == id then
    if copied.dedup_after or not copied.dedup_ttl then
      -- Its window starts again at the job's next end (reprocess.lua).
      if copied.dedup_after then redis.call('HDEL', row, 'dedup_ttl') end
      redis.call('SET', key, id)
    elseif ttl > 0 then
      -- A TTL from enqueue runs on as it was, here as there.
      redis.call('SET', key, id, 'PX', ttl)
      redis.call('ZADD', root .. 'dedups', now_ms() + ttl, copied.dedup)
    end
  end
end
-- The marks the claim reads before it walks bands or reads costs (enqueue.lua writes them).
if copied.prio then redis.call('HSET', root .. 'meta', 'banded', 1) end
local cost = tonumber(copied.cost or '1')
if cost > tonumber(redis.call('HGET', root .. 'meta', 'costed') or '0') and cost > 1 then
  redis.call('HSET', root .. 'meta', 'costed', cost)
end
push_lane(root, g, id)
rering(root, g, now_ms())
return 1
