-- complete.lua: jobs succeeded; delete their rows, or keep them as results for a while.
-- One call settles k jobs (k >= 1), each fenced by its own token and settled on its own.
-- KEYS[1] root   `emq:{q}:`
-- ARGV[1]        ttl: ms a completed row is kept, 0 = delete it (the queue's result_ttl);
--                at most 30 days. A row with a `result_ttl` of its own (enqueue.lua: its
--                task's) is kept that long instead.
-- ARGV[3i-1], ARGV[3i], ARGV[3i+1]  id, token (the attempts value the claim returned) and
--                result (the codec's bytes) of job i: kept on the row when ttl > 0, handed
--                to the job's flow parent when it has one (tell_parent in _lib.lua), else unused
-- A kept row reads state=completed, result, finished (server ms); it expires after ttl ms and
-- its id is in `done` until then, scored by the ms the row expires (finished + ttl), so the
-- admin verbs find it whatever ttl other consumers of the queue keep rows for; each call trims
-- a bounded number of members whose rows expired (score < now). A dedup key pointing at the
-- job lives as long as the row (deleted with it at ttl 0, else given the row's ttl), unless it
-- has a TTL of its own: then it lives for that, counted from enqueue or, when the row counts
-- it from the end (`dedup_after`), from now (dedup_window in _lib.lua).
-- The job's log (`log:<id>`) is deleted with the row, or given the kept row's expiry
-- (keep_row in _lib.lua). A job a cancel marked while it ran completes all the same: its
-- handler finished before the holder heard the cancel (cancel.lua).
-- Each completed id is announced on the shard channel `done` (announce in _lib.lua).
-- Returns one code per job, in order: 1 completed (3: and its flow parent, on another queue,
-- has an entry in this queue's outbox: a relay is due), 0 gone (no such row), -1 stale (the row
-- moved on: another claim holds it), -2 settled (this claim settled the job already: retried,
-- delayed or dead). The settle rule is `holding` in _lib.lua. The ttl, every token and every
-- result's size (16 MiB) are checked (EMQARG) before the first write.
local root = KEYS[1]
local ttl = int_arg(ARGV[1], 'ttl', 0, 2592000000)
for i = 3, #ARGV, 3 do
  token_arg(ARGV[i])
  if #ARGV[i + 1] > 16777216 then
    return redis.error_reply('EMQARG result <' .. #ARGV[i + 1] ..
      ' bytes>: must be at most 16777216 bytes')
  end
end
local now = ttl > 0 and now_ms() or nil
local out, finished = {}, {}
for i = 2, #ARGV, 3 do
  local id = ARGV[i]
  local row = root .. 'job:' .. id
  local fields, refusal = holding(row, ARGV[i + 1])
  if fields then
    detach(root, id, fields)
    local relayed = fields[7] and child_settled(root, id, row, true, ARGV[i + 2])
    local keep = tonumber(fields[8] or ttl)
    if keep == 0 then
      delete_row(root, id, row, fields[4])
    else
      now = now or now_ms()
      redis.call('HSET', row, 'state', 'completed', 'result', ARGV[i + 2], 'finished', now)
      keep_row(root, id, row, fields[4], keep, now)
    end
    finished[#finished + 1] = id
    out[#out + 1] = relayed and 3 or 1
  elseif refusal == 'stale' then
    out[#out + 1] = -1
  elseif refusal == 'settled' then
    out[#out + 1] = -2
  else
    out[#out + 1] = 0
  end
end
if #finished > 0 then
  redis.call('HINCRBY', root .. 'metrics:completed', 'count', #finished)
  if now then
    -- Rows whose expiry passed are gone by themselves; forget their ids, a bounded number per
    -- call (more than a chunk adds, so the index cannot outgrow the kept rows for long). A row
    -- is still readable in the ms it expires at, hence the exclusive bound.
    local done = root .. 'done'
    local old = redis.call('ZRANGE', done, '-inf', '(' .. now, 'BYSCORE', 'LIMIT', 0, 200)
    if #old > 0 then redis.call('ZREM', done, unpack(old)) end
  end
  announce(root, finished)
end
return out
