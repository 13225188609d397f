-- cool.lua: take one lane off the ring until a time (an upstream said "not before"), every
-- worker at once; optionally put back, in the same step, the leased job whose handler was told
-- so (the handler's Cool): back at its place in its lane, no attempt spent. A cool never
-- shortens one in force (uncool.lua ends it); pause and cool are separate states, so a lane
-- paused and cooled stays paused when its cool ends. The lane sits in `rdue` until then: the
-- claim and promote ring it again at that time, with no call needed (see bench in _lanes.lua).
-- KEYS[1] root   `emq:{q}:`
-- ARGV[1] group  the lane (with a job: the job's own lane, read from its row, wins)
-- ARGV[2] at     when the cool ends: ms from now (mode "in") or server epoch ms (mode "at")
-- ARGV[3] mode   "in" or "at"
-- ARGV[4] id     optional: the leased job to put back
-- ARGV[5] token  its fencing token (attempts from the claim)
-- Returns {cooled, code, until}: cooled 1 when the lane's cool end moved (0: it cooled at least
-- that long already, or the end is past), code for the job (1 back in its lane, 2 cancelled: a
-- cancel marked it while it ran, announced on `done`; 0 gone; -1 no job given), until the
-- server epoch ms the lane cools until (0: not cooling).
-- Errors  EMQARG mode, at or token out of bounds; EMQSTALE token mismatch; EMQSTATE this claim
--         settled the job already (checked before any write: the settle rule is `held`).
local root, g, mode, id = KEYS[1], ARGV[1], ARGV[3], ARGV[4]
if mode ~= 'in' and mode ~= 'at' then
  error({err = 'EMQARG mode ' .. tostring(mode) .. ': must be "in" or "at"'})
end
local at
if mode == 'in' then
  at = ms_arg(ARGV[2], 'seconds', 1)
else
  at = int_arg(ARGV[2], 'until', 0, 9007199254740991)
end
local now = now_ms()
if mode == 'in' then at = now + at end

local row = root .. 'job:' .. (id or '')
local code, fields = -1, nil
if id then
  token_arg(ARGV[5])
  fields = held(row, ARGV[5], 'cool')
  code = 0
  if fields then g = fields[3] or '_' end
end

local cooled, ends = 0, 0
if at > now then
  local before = tonumber(redis.call('HGET', root .. 'cooling', g) or '0')
  if before >= at then
    ends = before -- cooling that long already: off the ring and benched, nothing to write
  else
    redis.call('HSET', root .. 'cooling', g, at)
    cooled, ends = 1, at
    dering(root, g)
    bench(root, g, now)
    -- Parked consumers learn when it falls due (their upkeep's next due counts `rdue`).
    redis.call('LPUSH', root .. 'wake', 's')
    redis.call('LTRIM', root .. 'wake', 0, 63)
  end
end

if fields then
  -- In an ordered queue it goes on holding its lane, unless a cancel ends it here.
  detach(root, id, fields, not fields[6])
  if fields[6] then
    end_marked(root, id, row, fields[4], fields[6], now)
    announce(root, {id})
    code = 2
  else
    -- Not run: the claim's attempt is given back as grace, as delay.lua does.
    redis.call('HINCRBY', row, 'grace', 1)
    redis.call('HSET', row, 'state', 'pending')
    push_lane(root, g, id)
    rering(root, g, now)
    code = 1
  end
end
return {cooled, code, ends}
