-- enqueue.lua: admit a chunk of jobs, each to its lane now or to the schedule for later.
-- One call admits k items (k >= 1), each atomic and idempotent on its own; the chunk is not a
-- transaction. A refused item writes nothing and the others go on (its checks run first).
-- KEYS[1] root      `emq:{q}:` (every other key is derived from it)
-- ARGV, eleven per item, item i at 11(i-1)+1 ..:
--   id        branded JOB id (minted host-side)
--   payload   bytes (the codec's output)
--   group     lane name (`_` = the default lane)
--   run_at    0 = now; > 0 = absolute run-at ms; < 0 = run in -run_at ms (server clock)
--   dedup     producer dedup key, or "" for none
--   dedup_ttl ms the dedup key lives, counted from now, whatever happens to the job (the row
--             records it as `dedup_ttl`, the `dedups` index by its expiry); 0 = as long as the
--             job's row (a kept result too; released when the job dies, see bury in _ends.lua)
--   dedup_from "enqueue" (dedup_ttl counts from now) or "finish": the key lives as long as the
--             job is not finished, then dedup_ttl (> 0) from its end (completed, dead, cancelled
--             or removed); the row records it as `dedup_after` (dedup_window in _ends.lua)
--   result_ttl ms this job's row is kept once completed, -1 = the completer's (complete.lua)
--   debounce  "" = none; else "wait_ms:max_ms:keep": the item is its dedup key's debounced job
--             (run_at is -wait_ms). While the job the key maps to waits in the schedule and never
--             ran (attempts 0), the item moves it to now + wait_ms (at most the first call's
--             time + max_ms, the row's `deb_until`; max 0 = unbounded) and, with keep "last",
--             replaces its payload: {3, that id, "scheduled"}. Otherwise (no such job, or it
--             is due, running or done) the item is a new job and the key moves to it.
--   priority  0..9, higher = more urgent; 5 = the default band (the row records `prio` only
--             for another; the lane scores the job 5 - priority: see push_lane in _lane_jobs.lua)
--   cost      1..1000, the job's units (the row records `cost` only when not 1, and the queue
--             is marked `costed` with the dearest cost yet: the claim reads costs only then)
-- On a shard of a sharded queue ARGV opens with "fence" and the producer's placement epoch,
-- and each item has a twelfth word, its lane's slot (0..16383): an item of a lane this shard
-- does not serve is refused EMQMOVED before its dedup key or id is read (_shard.lua); an item
-- of a lane held here for a move whose key and id this shard does not hold is refused EMQHELD
-- (its producer looks for the key, and for an id its caller gave, on the source the refusal
-- names, then sends the item again in a call opening "fence checked", or answers the
-- duplicate it found there). A call with no fence on a shard (meta `shard` set: a plain queue
-- on a sharded queue's name) is refused whole, EMQSHARDED, before its first write (unfenced in
-- _shard.lua; items before it wrote nothing: their answers, duplicates say, are dropped with
-- the call).
-- Returns three values per item, in order: {1, id, ""} enqueued, {2, id, ""} scheduled,
-- {3, id, "scheduled"} debounced (an earlier call's job moved, see debounce),
-- {0, existing_id, state} duplicate (state: the existing job's row state, read in this call:
-- pending, scheduled, active, waiting, completed, dead, cancelled, or "absent" when a dedup
-- key outlived its job's row), {-1, "EMQKIND …" | "EMQARG …" | "EMQFULL …" | "EMQMOVED …",
-- ""} refused (nothing of that item written; EMQHELD <source>: lane <lane>, above). EMQFULL:
-- the item's lane holds as many unfinished jobs as its backlog cap (the lane's `gcap`, else
-- meta `dcap`): pending, leased and scheduled (lane_backlog in _lane_jobs.lua). Duplicates
-- answer before the cap: they write nothing.
-- Each item is admitted by admit_item (_admit.lua; the writes besides its state and place in
-- _admit_writes.lua).
local root = KEYS[1]
local wake_key = root .. 'wake'
-- The call's state, shared with the admission's helpers (a helper sees no script's locals):
-- `fence` (fence_reader in _shard.lua; nil: not a shard), `now` (read once, when the first item
-- needs the clock), `wakes` (lanes that joined the ring), `due_changed` (the schedule's due
-- times moved), `cap_of` (the call's cap reader, made at its first write: first_write; nil:
-- none yet), `backlogs` (a capped lane's backlog, read once per call, counted on as items join
-- it) and meta `banded`, `costed` and `costmax` as read (nil: not read yet; record_priority,
-- record_cost in _admit_writes.lua, and admit_item).
local a = {fence = fence_reader(root, ARGV), wakes = 0, due_changed = false, backlogs = {}}

local out = {}
local first, width = 1, 11
if a.fence then first, width = 3, 12 end
for i = first, #ARGV, width do
  local code, value, state = admit_item(root, a, ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3],
    ARGV[i + 4], ARGV[i + 5], ARGV[i + 6], ARGV[i + 7], ARGV[i + 8], ARGV[i + 9], ARGV[i + 10],
    a.fence and ARGV[i + 11])
  if code == -2 then return redis.error_reply(value) end -- nothing of the call written yet
  out[#out + 1], out[#out + 2], out[#out + 3] = code, value, state or ''
end

-- One wake token per lane that joined the ring, pushed once for the chunk (the list is capped
-- at 64); token "s" tells idle consumers to learn the new due time from an upkeep.
if a.wakes > 0 then
  local tokens = {}
  for n = 1, math.min(a.wakes, 64) do tokens[n] = '1' end
  redis.call('LPUSH', wake_key, unpack(tokens))
end
if a.due_changed then redis.call('LPUSH', wake_key, 's') end
if a.wakes > 0 or a.due_changed then redis.call('LTRIM', wake_key, 0, 63) end
return out
