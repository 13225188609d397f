-- cancel.lua: cancel a job. A pending or scheduled job ends at once; a leased one is marked
-- and its holder told on the shard channel `cancel`, so the holder stops its handler and ends
-- the job with this script's token form. Nothing runs a cancelled job again.
-- KEYS[1] root    `emq:{q}:`
-- ARGV[1] id      the job id
-- ARGV[2] reason  why, at most 256 bytes (kept as the row's `cancel`; "" allowed)
-- ARGV[3] ttl     ms a cancelled row is kept (the queue's result_ttl), 0 = delete it;
--                 at most 30 days
-- ARGV[4] token   "" = a cancel by anyone; else the holder's fencing token (the attempts value
--                 its claim returned): it ends its own job as cancelled ("" reason: the mark's)
-- A cancelled row reads state=cancelled, cancel (the reason), finished (server ms); it is kept
-- like a completed row (keep_row in _ends.lua: expires after ttl ms, its id in `done` until
-- then, its log with it) or deleted at ttl 0, and announced on the shard channel `done`.
-- A marked row (active, with `cancel` and `cancel_ttl`) ends cancelled by its holder's token
-- form, or when its attempt fails or defers (retry.lua, delay.lua) or its lease expires
-- (reap_expired): end_marked in _ends.lua. complete.lua completes it all the same (the
-- handler finished before the cancel reached it). A later cancel overwrites the reason.
-- Returns, without a token, the state the job was in: 'pending', 'scheduled' or 'waiting' (a
-- flow parent; its children run on) (cancelled
-- now), 'active' (marked; its holder was told), 'completed', 'dead' or 'cancelled' (finished
-- already: untouched), '' (no such job). With a token: 1 cancelled, 0 gone, -1 stale (another
-- claim holds the job), -2 settled (this claim settled it already).
-- Errors  EMQARG an argument out of bounds (checked before the first write).
local root, id, reason, token = KEYS[1], ARGV[1], ARGV[2], ARGV[4]
local ttl = int_arg(ARGV[3], 'ttl', 0, 2592000000)
if #reason > 256 then
  return redis.error_reply('EMQARG reason <' .. #reason .. ' bytes>: must be at most 256 bytes')
end
if token ~= '' then token_arg(token) end
local row = root .. 'job:' .. id
local channel = root .. 'cancel'

if token ~= '' then
  local fields, refusal = holding(row, token)
  if refusal == 'stale' then return -1 end
  if refusal == 'settled' then return -2 end
  if not fields then return 0 end
  detach(root, id, fields)
  if reason == '' then reason = fields[6] or '' end
  end_cancelled(root, id, row, fields[4], reason, ttl, now_ms())
  announce(root, {id})
  return 1
end

local fields = read_row(row)
local state = fields[2]
if not state then return '' end
if state == 'active' then
  redis.call('HSET', row, 'cancel', reason, 'cancel_ttl', ttl)
  redis.call('SPUBLISH', channel, id)
  return state
end
if state ~= 'pending' and state ~= 'scheduled' and state ~= 'waiting' then return state end
detach(root, id, fields)
end_cancelled(root, id, row, fields[4], reason, ttl, now_ms())
announce(root, {id})
-- A reaped job's holder may be alive and still running it: tell it too.
if fields[5] then redis.call('SPUBLISH', channel, id) end
return state
