-- enqueue.lua: admit one job to its lane now, or to the schedule for later.
-- KEYS[1] root      `emq:{q}:` (every other key is derived from it)
-- ARGV[1] id        branded JOB id (minted host-side)
-- ARGV[2] payload   bytes (the codec's output)
-- ARGV[3] group     lane name (`_` = the default lane)
-- ARGV[4] run_at    0 = now; > 0 = absolute run-at ms; < 0 = run in -run_at ms (server clock)
-- ARGV[5] dedup     producer dedup key, or "" for none
-- ARGV[6] dedup_ttl ms the dedup key lives at most, 0 = until the job's row is deleted
-- Returns {1, id} enqueued, {2, id} scheduled, {0, existing_id} duplicate.
-- Errors  EMQKIND when the id is not JOB-namespaced (nothing written).
local root = KEYS[1]
local id, payload, g = ARGV[1], ARGV[2], ARGV[3]
-- run_at: 10 years of delay, or an absolute time before 2^53 ms (the host bounds it closer).
local run_at = int_arg(ARGV[4], 'run_at', -315360000000, 9007199254740991)
local dedup, dedup_ttl = ARGV[5], ms_arg(ARGV[6], 'dedup_ttl', 0)
local row = root .. 'job:' .. id

-- Policy before existence before write.
if string.sub(id, 1, 3) ~= 'JOB' then
  return redis.error_reply('EMQKIND job id must be JOB-namespaced, got ' .. id)
end
if dedup ~= '' then
  local seen = redis.call('GET', root .. 'de:' .. dedup)
  if seen then return {0, seen} end
end
if redis.call('EXISTS', row) == 1 then return {0, id} end

if dedup ~= '' then
  if dedup_ttl > 0 then
    redis.call('SET', root .. 'de:' .. dedup, id, 'PX', dedup_ttl)
  else
    redis.call('SET', root .. 'de:' .. dedup, id)
  end
end

if run_at ~= 0 then
  local now = now_ms()
  local at = run_at
  if run_at < 0 then at = now - run_at end
  if at > now then
    redis.call('HSET', row, 'state', 'scheduled', 'attempts', 0, 'payload', payload, 'group', g)
    if dedup ~= '' then redis.call('HSET', row, 'dedup', dedup) end
    redis.call('ZADD', root .. 'schedule', at, id)
    -- Token "s": idle consumers learn the new due time from an upkeep (see _cadence.py).
    redis.call('LPUSH', root .. 'wake', 's')
    redis.call('LTRIM', root .. 'wake', 0, 63)
    return {2, id}
  end
end

redis.call('HSET', row, 'state', 'pending', 'attempts', 0, 'payload', payload, 'group', g)
if dedup ~= '' then redis.call('HSET', row, 'dedup', dedup) end
-- A lane that was empty was off the ring (the ring holds only serviceable lanes).
if push_lane(root, g, id) == 1 then
  if serviceable(root, g) then
    redis.call('RPUSH', root .. 'ring', g)
    wake(root)
  elseif lane_rate_wait(root, g) > 0 then
    -- Its rate window is spent: bench it so promote rings it when the window ends (an empty
    -- lane is never benched, so without this it would wait for an enqueue after the window).
    bench(root, g, now_ms())
    -- Token "s": idle consumers learn the new due time from an upkeep (see _cadence.py).
    redis.call('LPUSH', root .. 'wake', 's')
    redis.call('LTRIM', root .. 'wake', 0, 63)
  end
end
return {1, id}
