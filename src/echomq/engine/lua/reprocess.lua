-- reprocess.lua: give a dead job a new life in its lane, with a fresh failure budget.
-- KEYS[1] root  `emq:{q}:`
-- ARGV[1] id    the job id
-- On a shard of a sharded queue ARGV is fenced (_shard.lua): "fence", the producer's epoch,
-- the id, the slot of the row's lane. A dead job whose lane this shard no longer serves (moved,
-- or handed on by a grow) is not revived here, where its lane would ring on two shards: the
-- reply is {refusal, row (field, value pairs), log lines, dedup ttl} (ttl: ms, -1 none, -3 no
-- key naming the job), nothing written, and the host copies it to the lane's shard
-- (dead_move.lua), then deletes it here.
-- Its dedup key, when it lived as long as the row (released at death) or counts from the job's
-- end (its window started at death: the row's `dedup_after`), is the job's again while it
-- lives: taken back when free or still its own, with no TTL (the window starts at its next
-- end); one another job holds now stays that job's. A TTL from enqueue runs on as it was.
-- Returns 1 back in its lane, 0 gone (or, fenced, the refusal above).
-- Errors  EMQSTATE the job is not dead.
local root = KEYS[1]
local fence = fence_reader(root, ARGV)
local id = fence and ARGV[3] or ARGV[1]
local row = root .. 'job:' .. id
local fields = redis.call('HMGET', row, 'state', 'group', 'attempts')
if not fields[1] then return 0 end
if fields[1] ~= 'dead' then
  return redis.error_reply('EMQSTATE reprocess refused: job ' .. id .. ' is ' .. fields[1])
end
local g = fields[2] or '_'
local moved = fence and fence(g, ARGV[4])
if moved then
  local dedup, ttl = redis.call('HGET', row, 'dedup'), -3
  if dedup and redis.call('GET', root .. 'de:' .. dedup) == id then
    ttl = redis.call('PTTL', root .. 'de:' .. dedup)
  end
  return {moved, redis.call('HGETALL', row), redis.call('LRANGE', log_of(root, id), 0, -1), ttl}
end
redis.call('ZREM', root .. 'dead', id)
redis.call('HDEL', row, 'last_error', 'stalled', 'finished', 'traceback')
-- attempts is the fencing token and never goes back; grace resets the failure count.
redis.call('HSET', row, 'state', 'pending', 'grace', fields[3])
local dedup = redis.call('HMGET', row, 'dedup', 'dedup_after', 'dedup_ttl')
if dedup[1] and (dedup[2] or not dedup[3]) then
  local key = root .. 'de:' .. dedup[1]
  local seen = redis.call('GET', key)
  if dedup[2] then redis.call('HDEL', row, 'dedup_ttl') end
  -- A plain SET drops the key's TTL: its window starts again at the job's next end.
  if not seen or seen == id then redis.call('SET', key, id) end
end
push_lane(root, g, id)
rering(root, g, now_ms())
return 1
