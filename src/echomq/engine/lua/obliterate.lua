-- obliterate.lua: delete every key of a paused queue. Bounded: call again while it answers 1.
-- KEYS[1] root    `emq:{q}:`
-- ARGV[1] force   1 = also delete leased jobs
-- ARGV[2] budget  most job rows to delete in this call; > 0
-- Returns 1 more to do, 0 done.
-- Errors  EMQSTATE the queue is not paused; EMQSTATE leased jobs present (without force).
-- Dedup keys go with their rows, a key with a TTL of its own too (delete_row's `everything`),
-- and so does a key whose row was gone before (it outlived its job): the `dedups` index.
-- Kept results (completed rows, found by the `done` index) go too, and so do flow parents
-- waiting for their children (the `waiting` index), their children's results and the outbox
-- of entries for parents on other queues (those parents wait on). Each call that deleted rows
-- publishes the wildcard `*` on the shard channel `done` (announce_all in _ends.lua): every
-- wait re-reads its row and answers None for a deleted one.
local root, force = KEYS[1], ARGV[1] == '1'
local budget = int_arg(ARGV[2], 'budget', 1, 10000)
if not redis.call('HGET', root .. 'meta', 'paused') then
  -- Already gone (an earlier call finished, meta with it): nothing left to refuse or delete.
  local left_over = redis.call('EXISTS', root .. 'meta', root .. 'active', root .. 'schedule',
    root .. 'dead', root .. 'done', root .. 'dedups', root .. 'lanes', root .. 'ring',
    root .. 'waiting', root .. 'flow:outbox')
  if left_over == 0 then return 0 end
  return redis.error_reply('EMQSTATE obliterate refused: queue is not paused')
end
if not force and redis.call('ZCARD', root .. 'active') > 0 then
  return redis.error_reply('EMQSTATE obliterate refused: leased jobs present (use force)')
end
local left = budget
local function sweep(set)
  if left <= 0 then return redis.call('EXISTS', set) == 0 end -- budget spent: call again
  local ids = redis.call('ZRANGE', set, 0, left - 1)
  for _, id in ipairs(ids) do
    local row = root .. 'job:' .. id
    delete_row(root, id, row, redis.call('HGET', row, 'dedup'), true)
    redis.call('ZREM', set, id)
  end
  left = left - #ids
  return redis.call('EXISTS', set) == 0
end
-- Every answer goes through here: waiters hear of this call's deletions before it returns.
local function answer(more)
  if left < budget then announce_all(root) end
  return more
end
for _, set in ipairs({root .. 'active', root .. 'schedule', root .. 'dead', root .. 'done',
    root .. 'waiting'}) do
  if not sweep(set) then return answer(1) end
end
for _, g in ipairs(redis.call('SMEMBERS', root .. 'lanes')) do
  if not sweep(lane_of(root, g)) then return answer(1) end
  redis.call('SREM', root .. 'lanes', g)
end
-- The dedup keys that outlived their rows, budget by budget like the rows.
if left <= 0 then return answer(1) end
local outlived = redis.call('ZRANGE', root .. 'dedups', 0, left - 1)
for _, key in ipairs(outlived) do
  redis.call('DEL', root .. 'de:' .. key)
  redis.call('ZREM', root .. 'dedups', key)
end
left = left - #outlived
if redis.call('EXISTS', root .. 'dedups') == 1 then return answer(1) end
for _, g in ipairs(redis.call('HKEYS', root .. 'grate')) do
  redis.call('DEL', lane_limiter_of(root, g), lane_claims_of(root, g))
end
for _, suffix in ipairs({'ring', 'paused', 'glimit', 'gactive', 'gextra', 'gweight', 'grate',
    'rdue', 'turn', 'holders', 'wake', 'limiter', 'lanes', 'metrics:completed', 'metrics:failed',
    'periodic', 'flow:outbox', 'meta', 'metrics:cancelled', 'claims', 'policies', 'gcap',
    'gscheduled', 'cooling', 'gband', 'served', 'rates', 'gdeficit', 'grun', 'ringweight'}) do
  redis.call('DEL', root .. suffix)
end
for p = 0, 9 do redis.call('DEL', root .. 'band:' .. p .. ':ring', root .. 'band:' .. p .. ':turn') end
return answer(0)
