-- retry.lua: the attempt failed; schedule the job again, or dead-letter it at max attempts.
-- KEYS[1] root          `emq:{q}:`
-- ARGV[1] id            the job id
-- ARGV[2] token         fencing token (attempts from the claim)
-- ARGV[3] delay         ms before the next attempt (server clock); 0 = back to its lane now
-- ARGV[4] max_attempts  failed attempts allowed; at this many the job goes dead
-- ARGV[5] error         the failure text, kept as last_error
-- Returns 1 scheduled (or back in its lane), 2 dead, 0 gone.
-- Errors  EMQSTALE token mismatch; EMQSTATE this claim settled the job already (the settle
--         rule is `held` in _lib.lua: leased, or reaped and not claimed since).
-- Failed attempts = attempts - grace: delays and reprocessing add grace, not failures.
local root = KEYS[1]
local id, token = ARGV[1], ARGV[2]
token_arg(token)
local delay = ms_arg(ARGV[3], 'delay', 0)
local max_attempts, err = int_arg(ARGV[4], 'max_attempts', 1, 1000), ARGV[5]
local row = root .. 'job:' .. id

local fields = held(row, token, 'retry')
if not fields then return 0 end
local g = detach(root, id, fields)
local now = now_ms()
local failed = tonumber(token) - tonumber(redis.call('HGET', row, 'grace') or '0')
if failed >= max_attempts then
  bury(root, id, row, err, now)
  return 2
end
redis.call('HSET', row, 'last_error', err)
if delay > 0 then
  redis.call('HSET', row, 'state', 'scheduled')
  redis.call('ZADD', root .. 'schedule', now + delay, id)
else
  redis.call('HSET', row, 'state', 'pending')
  push_lane(root, g, id)
  rering(root, g, now)
end
return 1
