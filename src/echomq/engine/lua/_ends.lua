-- _ends.lua: how a job ends: its row kept as a result, deleted, cancelled or dead-lettered, its
-- dedup key's window, and the waiters told. A library: each transition gets the helpers it calls
-- (engine/scripts.py).

-- A dedup key counted from the job's end (the row's `dedup_after`, ms, from enqueue.lua): the
-- job ended (completed, dead, cancelled or removed), so the key, if it still points at the
-- job, lives `dedup_after` ms from now, indexed in `dedups` like a TTL from enqueue (expired
-- members trimmed here too: an app whose keys all count from the end still bounds it). The row
-- then records it as `dedup_ttl` (a TTL of its own: the rules below leave it alone, and a
-- second end does not restart it); reprocess.lua takes it back.
local function dedup_window(root, id, row, dedup)
  local f = redis.call('HMGET', row, 'dedup_after', 'dedup_ttl')
  if not f[1] or f[2] then return end
  redis.call('HSET', row, 'dedup_ttl', f[1])
  local key = root .. 'de:' .. dedup
  if redis.call('GET', key) == id then
    local now = now_ms()
    redis.call('PEXPIRE', key, f[1])
    redis.call('ZADD', root .. 'dedups', now + tonumber(f[1]), dedup)
    redis.call('ZREMRANGEBYSCORE', root .. 'dedups', '-inf', now - 1)
  end
end

-- Delete a job's row and release its producer dedup key if that still points at it and lives
-- as long as the row. A key with a TTL of its own (the row has `dedup_ttl`, from enqueue, or
-- from the job's end: dedup_window) lives for that TTL whatever happens to its job;
-- `everything` (obliterate) releases it too.
local function delete_row(root, id, row, dedup, everything)
  if dedup then
    if not everything then dedup_window(root, id, row, dedup) end
    local key = root .. 'de:' .. dedup
    if redis.call('GET', key) == id
        and (everything or redis.call('HEXISTS', row, 'dedup_ttl') == 0) then
      redis.call('DEL', key)
    end
  end
  -- The job's log, and a flow parent's children's results, live as long as its row.
  redis.call('DEL', row, log_of(root, id), root .. 'flow:' .. id .. ':results',
    root .. 'flow:' .. id .. ':failed')
end

-- Keep a finished row `ttl` ms (> 0, the queue's result_ttl): the row and its log expire then,
-- its id is in `done` until then, scored by that expiry (so the admin verbs find it), and a
-- dedup key pointing at it lives as long (NX: a key with a TTL of its own keeps it). `batch`
-- (optional): a list that takes the `done` member (score, id) for the caller to add.
local function keep_row(root, id, row, dedup, ttl, now, batch)
  redis.call('PEXPIRE', row, ttl)
  -- The log and a flow parent's children's results go with the row (if it has them: most rows
  -- have none, and one EXISTS costs less than three PEXPIREs).
  local log, results, failed = log_of(root, id), root .. 'flow:' .. id .. ':results',
    root .. 'flow:' .. id .. ':failed'
  if redis.call('EXISTS', log, results, failed) > 0 then
    redis.call('PEXPIRE', log, ttl)
    redis.call('PEXPIRE', results, ttl)
    redis.call('PEXPIRE', failed, ttl)
  end
  if batch then
    batch[#batch + 1], batch[#batch + 2] = now + ttl, id
  else
    redis.call('ZADD', root .. 'done', now + ttl, id)
  end
  if dedup then
    dedup_window(root, id, row, dedup)
    local key = root .. 'de:' .. dedup
    if redis.call('GET', key) == id then redis.call('PEXPIRE', key, ttl, 'NX') end
  end
end

-- End a detached job as cancelled: kept `ttl` ms as state `cancelled` with its reason
-- (`cancel`) and `finished` (server ms), like a completed row (keep_row), or deleted at ttl 0;
-- counted in metrics:cancelled. The caller announces it on `done`. A flow child's parent is
-- told it failed ("cancelled: <reason>"), under the child's policy, so it never waits forever.
local function end_cancelled(root, id, row, dedup, reason, ttl, now)
  child_settled(root, id, row, false, 'cancelled: ' .. reason)
  if ttl == 0 then
    delete_row(root, id, row, dedup)
  else
    redis.call('HSET', row, 'state', 'cancelled', 'cancel', reason, 'finished', now)
    redis.call('HDEL', row, 'reaped', 'cancel_ttl')
    keep_row(root, id, row, dedup, ttl, now)
  end
  redis.call('HINCRBY', root .. 'metrics:cancelled', 'count', 1)
end

-- End a detached job that a cancel marked while it was leased (its `cancel` reason and the
-- canceller's `cancel_ttl`): a failure, a deferral or an expired lease of a job asked to stop
-- is not run again (retry, delay, reap).
local function end_marked(root, id, row, dedup, reason, now)
  local ttl = tonumber(redis.call('HGET', row, 'cancel_ttl') or '0')
  end_cancelled(root, id, row, dedup, reason, ttl, now)
end

-- Dead-letter a job whose row is already detached: `finished` is the server ms of death, and
-- `traceback` the failed attempt's (nil or "" for none: an older attempt's is dropped).
-- Its dedup key: one counted from the end starts its window (dedup_window); one that lived
-- as long as the row is released (a dead row is kept to be read, not as work done: the same
-- work may be enqueued again); one with a TTL from enqueue runs it out.
local function bury(root, id, row, err, now, traceback)
  local dedup = redis.call('HGET', row, 'dedup')
  if dedup then
    dedup_window(root, id, row, dedup)
    local key = root .. 'de:' .. dedup
    if redis.call('HEXISTS', row, 'dedup_ttl') == 0 and redis.call('GET', key) == id then
      redis.call('DEL', key)
    end
  end
  if traceback and traceback ~= '' then
    redis.call('HSET', row, 'state', 'dead', 'last_error', err, 'finished', now,
      'traceback', traceback)
  else
    redis.call('HSET', row, 'state', 'dead', 'last_error', err, 'finished', now)
    redis.call('HDEL', row, 'traceback')
  end
  redis.call('ZADD', root .. 'dead', now, id)
  redis.call('HINCRBY', root .. 'metrics:failed', 'count', 1)
  child_settled(root, id, row, false, err) -- a flow's child: its parent learns of the death
end

-- Tell waiters (Queue.wait) that jobs finished, completed or dead, or that their rows were
-- deleted: one `SPUBLISH done <id>` each, on the shard channel named like the `done` index
-- (same slot, so cluster-legal); a waiter re-reads its row on its id. For
-- several ids it asks first whether anyone subscribes: nobody waiting then costs one call per
-- script, not one per job; one id is published at once (a publish costs less than the
-- question). Race-free: a waiter subscribes before it reads the row.
local function announce(root, ids)
  if #ids == 0 then return end
  local channel = root .. 'done'
  if #ids > 1 and redis.call('PUBSUB', 'SHARDNUMSUB', channel)[2] == 0 then return end
  for _, id in ipairs(ids) do redis.call('SPUBLISH', channel, id) end
end

-- Tell every waiter of the queue to re-read its row: the wildcard message `*` on the `done`
-- channel (no job id is one character), one publish however many rows went (obliterate).
local function announce_all(root)
  redis.call('SPUBLISH', root .. 'done', '*')
end

-- Tell waiters that the rows of `ids` were deleted (remove, drain): one message per id, as
-- `announce`, or past 100 ids the one wildcard (announce_all). A waiter finding no row answers
-- None, so no wait outlives its row.
local function announce_deleted(root, ids)
  if #ids > 100 then announce_all(root) else announce(root, ids) end
end
