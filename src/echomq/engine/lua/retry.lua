-- retry.lua: attempts failed; schedule each job again, or dead-letter it at max attempts.
-- One call settles k jobs (k >= 1), each fenced by its own token and settled on its own.
-- KEYS[1] root          `emq:{q}:`
-- ARGV, six per job, job i at 6(i-1)+1 ..:
--   id            the job id
--   token         fencing token (attempts from the claim)
--   delay         ms before the next attempt (server clock); 0 = back to its lane now
--   max_attempts  failed attempts allowed; at this many the job goes dead
--   error         the failure text, kept as last_error
--   traceback     the failed attempt's formatted traceback, at most 8192 bytes ("" = none);
--                 the latest attempt's is kept on the row
-- Returns one code per job, in order: 1 scheduled (or back in its lane), 2 dead, 3 cancelled
-- (a cancel marked it while it ran: not retried, see cancel.lua), 0 gone, -1 stale (another
-- claim holds it), -2 settled (this claim settled it already). The settle
-- rule is `holding` in _settle.lua. Every number and every traceback's size is checked (EMQARG)
-- before the first write. A buried or cancelled job gets `finished` (server ms) and is
-- announced on the shard channel `done` (announce in _ends.lua).
-- A job retried (not dead) goes on holding its lane in an ordered queue (unhold in _lane_jobs.lua).
-- Failed attempts = attempts - grace: delays and reprocessing add grace, not failures.
local root = KEYS[1]
for i = 1, #ARGV, 6 do
  token_arg(ARGV[i + 1])
  ms_arg(ARGV[i + 2], 'delay', 0)
  int_arg(ARGV[i + 3], 'max_attempts', 1, 1000)
  if #ARGV[i + 5] > 8192 then
    return redis.error_reply('EMQARG traceback <' .. #ARGV[i + 5] ..
      ' bytes>: must be at most 8192 bytes')
  end
end
local now = now_ms()
local out, buried = {}, {}
-- The attempt's error text, and its traceback (or none: an older attempt's is dropped).
local function record(row, err, traceback)
  if traceback == '' then
    redis.call('HSET', row, 'last_error', err)
    redis.call('HDEL', row, 'traceback')
  else
    redis.call('HSET', row, 'last_error', err, 'traceback', traceback)
  end
end
for i = 1, #ARGV, 6 do
  local id, token, delay = ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2])
  local err, traceback = ARGV[i + 4], ARGV[i + 5]
  local row = root .. 'job:' .. id
  local fields, refusal = holding(row, token)
  local failed = fields and tonumber(token) - tonumber(redis.call('HGET', row, 'grace') or '0')
  if not fields then
    out[#out + 1] = (refusal == 'stale' and -1) or (refusal == 'settled' and -2) or 0
  elseif fields[6] then
    -- A cancel marked the job while it ran: its failure ends it cancelled, never retried.
    detach(root, id, fields)
    end_marked(root, id, row, fields[4], fields[6], now)
    buried[#buried + 1] = id
    out[#out + 1] = 3
  elseif failed >= tonumber(ARGV[i + 3]) then
    detach(root, id, fields)
    bury(root, id, row, err, now, traceback)
    buried[#buried + 1] = id
    out[#out + 1] = 2
  elseif fields[2] == 'pending' and delay == 0 then
    -- A reaped job retried at once by its holder already waits in its lane, in mint order:
    -- it stays there, and so does its lane's place on the ring.
    record(row, err, traceback)
    out[#out + 1] = 1
  else
    local g = detach(root, id, fields, true) -- in an ordered queue it goes on holding its lane
    record(row, err, traceback)
    if delay > 0 then
      redis.call('HSET', row, 'state', 'scheduled')
      redis.call('ZADD', root .. 'schedule', now + delay, id)
      scheduled_moved(root, g, 1)
    else
      redis.call('HSET', row, 'state', 'pending')
      push_lane(root, g, id)
      rering(root, g, now)
    end
    out[#out + 1] = 1
  end
end
announce(root, buried)
return out
