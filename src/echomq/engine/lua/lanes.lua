-- lanes.lua: every known lane and its state (a pure read for the read plane and dashboards).
-- KEYS[1] root  `emq:{q}:`
-- ARGV    groups to report; none = every lane that is non-empty, leased, paused, cooling or
--         configured.
-- Returns a flat list, 12 fields per lane: group, depth, active, limit (0 = none),
-- weight, rate ("max:window[:smooth]" or ""), paused (0/1), rate wait ms (0 = within budget),
-- backlog cap (0 = none), scheduled (its jobs in the schedule), cooling until (server epoch
-- ms, 0 = not cooling), cooling left ms (0 = not cooling): the settings in force, the lane's
-- own or else the queue's default for lanes.
local root = KEYS[1]
local groups = ARGV
if #groups == 0 then
  local seen = {}
  groups = {}
  local function add(list)
    for _, g in ipairs(list) do
      if not seen[g] then seen[g] = true; groups[#groups + 1] = g end
    end
  end
  add(redis.call('SMEMBERS', root .. 'lanes'))
  add(redis.call('HKEYS', root .. 'gactive'))
  add(redis.call('SMEMBERS', root .. 'paused'))
  add(redis.call('HKEYS', root .. 'cooling'))
  add(redis.call('HKEYS', root .. 'glimit'))
  add(redis.call('HKEYS', root .. 'gweight'))
  add(redis.call('HKEYS', root .. 'grate'))
  add(redis.call('HKEYS', root .. 'gcap'))
  add(redis.call('HKEYS', root .. 'gscheduled'))
  table.sort(groups)
end
local out, now = {}, now_ms()
local default = redis.call('HMGET', root .. 'meta', 'dlimit', 'dweight', 'drate', 'dcap')
for _, g in ipairs(groups) do
  out[#out + 1] = g
  out[#out + 1] = redis.call('ZCARD', lane_of(root, g))
  out[#out + 1] = tonumber(redis.call('HGET', root .. 'gactive', g) or '0')
  out[#out + 1] = tonumber(redis.call('HGET', root .. 'glimit', g) or default[1] or '0')
  out[#out + 1] = tonumber(redis.call('HGET', root .. 'gweight', g) or default[2] or '1')
  out[#out + 1] = redis.call('HGET', root .. 'grate', g) or default[3] or ''
  out[#out + 1] = redis.call('SISMEMBER', root .. 'paused', g)
  out[#out + 1] = lane_rate_wait(root, g, now)
  out[#out + 1] = tonumber(redis.call('HGET', root .. 'gcap', g) or default[4] or '0')
  out[#out + 1] = tonumber(redis.call('HGET', root .. 'gscheduled', g) or '0')
  -- Read here, not by lane_cool_wait: a pure read drops no ended cool.
  local cool = tonumber(redis.call('HGET', root .. 'cooling', g) or '0')
  if cool <= now then cool = 0 end
  out[#out + 1] = cool
  out[#out + 1] = cool > 0 and cool - now or 0
end
return out
