-- delay.lua: re-schedule a leased job without counting a failure (the handler asked for later).
-- KEYS[1] root   `emq:{q}:`
-- ARGV[1] id     the job id
-- ARGV[2] token  fencing token
-- ARGV[3] delay  ms from now (server clock); > 0
-- Returns 1 scheduled, 2 cancelled (a cancel marked it while it ran: it is not run again, see
-- cancel.lua; announced on `done`), 0 gone.
-- Errors  EMQSTALE token mismatch; EMQSTATE this claim settled the job already (the settle
--         rule is `held` in _settle.lua: leased, or reaped and not claimed since).
local root = KEYS[1]
local id, token = ARGV[1], ARGV[2]
token_arg(token)
local delay = ms_arg(ARGV[3], 'delay', 1)
local row = root .. 'job:' .. id

local fields = held(row, token, 'delay')
if not fields then return 0 end
-- In an ordered queue it goes on holding its lane, unless a cancel ends it here.
local g = detach(root, id, fields, not fields[6])
if fields[6] then
  end_marked(root, id, row, fields[4], fields[6], now_ms())
  announce(root, {id})
  return 2
end
redis.call('HINCRBY', row, 'grace', 1)
redis.call('HSET', row, 'state', 'scheduled')
redis.call('ZADD', root .. 'schedule', now_ms() + delay, id)
scheduled_moved(root, g, 1)
return 1
