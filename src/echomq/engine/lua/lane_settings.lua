-- lane_settings.lua: on a grow's target shard, write the settings of lanes of a range their
-- source hands on, as the source holds them (docs/concepts/shards.md, "Changing S", step 2): a
-- lane of the range admitted here before its move obeys its own ceiling, weight, rate, cap,
-- pause and cooling. Idempotent: writing the settings in force changes nothing (no fresh
-- budget, no window restarted).
-- KEYS[1] root   `emq:{q~k}:` (the target shard)
-- ARGV[1..]      per lane 8 values: group; glimit, gweight, grate, gcap ("" = none: the lane
--                follows the default); policy (its JSON, "" none); paused ("1" or ""); cooling
--                (server ms its cool ends, "" none)
-- Returns the number of lanes whose settings changed here.
-- Errors  EMQARG a value out of bounds (every value is checked before any write).
local root = KEYS[1]
local fields = {'glimit', 'gweight', 'grate', 'gcap'}
local width = 8
if #ARGV % width ~= 0 then
  error({err = 'EMQARG lanes ' .. #ARGV .. ': values must come 8 a lane'})
end
for i = 1, #ARGV, width do
  for j, field in ipairs(fields) do setting_arg(field, ARGV[i + j]) end
  if ARGV[i + 7] ~= '' then int_arg(ARGV[i + 7], 'cooling', 0, 9007199254740991) end
end

local now, lanes = now_ms(), 0
for i = 1, #ARGV, width do
  local g, changed = ARGV[i], 0
  for j, field in ipairs(fields) do
    changed = changed + set_lane(root, g, field, ARGV[i + j], now)
  end
  local policy = ARGV[i + 5]
  if policy == '' then
    changed = changed + redis.call('HDEL', root .. 'policies', g)
  elseif redis.call('HGET', root .. 'policies', g) ~= policy then
    redis.call('HSET', root .. 'policies', g, policy)
    changed = changed + 1
  end
  if ARGV[i + 6] == '1' then
    if redis.call('SADD', root .. 'paused', g) == 1 then
      dering(root, g)
      changed = changed + 1
    end
  elseif redis.call('SREM', root .. 'paused', g) == 1 then
    rering(root, g, now)
    changed = changed + 1
  end
  -- A cool already over on the source is none: only a cool still in force is carried.
  local ends = tonumber(ARGV[i + 7] ~= '' and ARGV[i + 7] or '0')
  if ends > now then
    if tonumber(redis.call('HGET', root .. 'cooling', g) or '0') ~= ends then
      redis.call('HSET', root .. 'cooling', g, ends)
      redis.call('ZREM', root .. 'rdue', g)
      rering(root, g, now)
      changed = changed + 1
    end
  else
    changed = changed + uncool_lane(root, g, now)
  end
  if changed > 0 then lanes = lanes + 1 end
end
return lanes
