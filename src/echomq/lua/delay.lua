-- delay.lua: re-schedule a leased job without counting a failure (the handler asked for later).
-- KEYS[1] root   `emq:{q}:`
-- ARGV[1] id     the job id
-- ARGV[2] token  fencing token
-- ARGV[3] delay  ms from now (server clock); > 0
-- Returns 1 scheduled, 0 gone.
-- Errors  EMQSTALE token mismatch; EMQSTATE the job is not leased.
local root = KEYS[1]
local id, token, delay = ARGV[1], ARGV[2], tonumber(ARGV[3])
local row = root .. 'job:' .. id

local fields = fenced(row, token, 'delay')
if not fields then return 0 end
if fields[2] ~= 'active' then
  return redis.error_reply('EMQSTATE delay refused: job ' .. id .. ' is ' .. fields[2])
end
detach(root, id, fields)
redis.call('HINCRBY', row, 'grace', 1)
redis.call('HSET', row, 'state', 'scheduled')
redis.call('ZADD', root .. 'schedule', now_ms() + delay, id)
return 1
