-- eta.lua: what a job's (or a new job's) wait depends on, in one pure read (eta.py models it).
-- KEYS[1] root  `emq:{q}:`
-- ARGV[1] job   the job id whose place to read; "" = a job enqueued now on lane ARGV[2]
-- ARGV[2] lane  the lane, when ARGV[1] is ""; both "": no job, every lane (for a listing)
-- Returns nil when the job waits in no lane (unknown, scheduled, leased or finished); else
--   {lane, ahead, queue paused (0/1), queue's measured rate ("rate:at:since" as of the last
--   fold, "" = none), its claims counted since (0 = none), now ms, leased jobs of the queue,
--   then 10 fields per lane with pending work (the job's lane first): lane, depth, weight,
--   ceiling (0 = none), leased, rate ("max:window[:smooth]" or ""), paused (0/1), cooling left
--   ms (0 = not cooling), measured rate ("" = none), claims counted since the fold}.
--   (count_claims in _served.lua keeps the measured rates.)
-- `ahead` is the job's rank in its lane (ZRANK: right for any score order), or the lane's depth
-- for a new job. The lanes come from `lanes` (non-empty lanes): O(lanes) fields, O(log n) per
-- lane, never a scan of a lane's jobs.
local root = KEYS[1]
local id, g = ARGV[1], ARGV[2]
local ahead = 0
if id ~= '' then
  local fields = redis.call('HMGET', root .. 'job:' .. id, 'state', 'group')
  if fields[1] ~= 'pending' or not fields[2] then return nil end
  g = fields[2]
  ahead = redis.call('ZRANK', lane_of(root, g), id)
  if not ahead then return nil end
elseif g ~= '' then
  ahead = redis.call('ZCARD', lane_of(root, g))
end
local now = now_ms()
local meta = redis.call('HMGET', root .. 'meta', 'paused', 'dlimit', 'dweight', 'drate')
local rates, served = root .. 'rates', root .. 'served'
local out = {g, ahead, meta[1] and 1 or 0, redis.call('HGET', rates, '') or '',
  tonumber(redis.call('HGET', served, '') or '0'), now, redis.call('ZCARD', root .. 'active')}
local function add(lane)
  out[#out + 1] = lane
  out[#out + 1] = redis.call('ZCARD', lane_of(root, lane))
  out[#out + 1] = tonumber(redis.call('HGET', root .. 'gweight', lane) or meta[3] or '1')
  out[#out + 1] = tonumber(redis.call('HGET', root .. 'glimit', lane) or meta[2] or '0')
  out[#out + 1] = tonumber(redis.call('HGET', root .. 'gactive', lane) or '0')
  out[#out + 1] = redis.call('HGET', root .. 'grate', lane) or meta[4] or ''
  out[#out + 1] = redis.call('SISMEMBER', root .. 'paused', lane)
  -- Read here, not by lane_cool_wait: a pure read drops no ended cool.
  local cool = tonumber(redis.call('HGET', root .. 'cooling', lane) or '0')
  out[#out + 1] = cool > now and cool - now or 0
  out[#out + 1] = redis.call('HGET', rates, lane) or ''
  out[#out + 1] = tonumber(redis.call('HGET', served, lane) or '0')
end
if g ~= '' then add(g) end
for _, lane in ipairs(redis.call('SMEMBERS', root .. 'lanes')) do
  if lane ~= g then add(lane) end
end
return out
