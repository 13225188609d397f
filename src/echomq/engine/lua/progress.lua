-- progress.lua: the holder of a job reports its progress and/or appends lines to its log.
-- KEYS[1] root      `emq:{q}:`
-- ARGV[1] id        the job id
-- ARGV[2] token     fencing token (the attempts value the claim returned)
-- ARGV[3] has_value 1 = set the row's `progress` to ARGV[4], 0 = leave it
-- ARGV[4] value     the progress as JSON text, at most 1024 bytes ("" when has_value is 0)
-- ARGV[5] keep      the newest log lines kept, 1 … 1000 (older ones are trimmed)
-- ARGV[6…]          log lines to append, at most 1000, each at most 1024 bytes
-- The log is the LIST `log:<id>`, oldest line first; it lives as long as the row (delete_row
-- deletes it with the row, complete gives it a kept row's expiry). Read-only settle rule:
-- `holding` without its side effect, so a report from a reaped holder neither takes the job
-- back nor costs it its claim to settle.
-- Returns 1 recorded, 0 gone (no row, or this claim settled the job already).
-- Errors  EMQSTALE another claim holds the job; EMQARG an argument out of bounds (checked
--         before the first write: a refused call writes nothing).
local root, id, token = KEYS[1], ARGV[1], ARGV[2]
token_arg(token)
local has_value = int_arg(ARGV[3], 'has_value', 0, 1) == 1
local keep = int_arg(ARGV[5], 'keep', 1, 1000)
if #ARGV[4] > 1024 then
  return redis.error_reply('EMQARG value <' .. #ARGV[4] .. ' bytes>: must be at most 1024 bytes')
end
if #ARGV - 5 > 1000 then
  return redis.error_reply('EMQARG log <' .. (#ARGV - 5) .. ' lines>: must be at most 1000')
end
for i = 6, #ARGV do
  if #ARGV[i] > 1024 then
    return redis.error_reply('EMQARG log line <' .. #ARGV[i] ..
      ' bytes>: must be at most 1024 bytes')
  end
end
local row = root .. 'job:' .. id
local fields, refusal, seen = holding(row, token, true)
if refusal == 'stale' then
  return redis.error_reply('EMQSTALE progress token mismatch: row is at ' .. seen[1])
end
if not fields then return 0 end
if has_value then redis.call('HSET', row, 'progress', ARGV[4]) end
if #ARGV > 5 then
  local log = log_of(root, id)
  redis.call('RPUSH', log, unpack(ARGV, 6))
  redis.call('LTRIM', log, -keep, -1)
end
return 1
