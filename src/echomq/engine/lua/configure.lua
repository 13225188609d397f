-- configure.lua: set or clear queue-wide settings in `meta` (pause, concurrency, rate limit,
-- ordered lanes, the default for lanes).
-- KEYS[1] root   `emq:{q}:`
-- ARGV    field, value pairs; fields: paused (1), concurrency (jobs, <= 10^6), max (jobs per
--         window, <= 10^9; <= 10^4 when smooth), window (ms, <= 10 years), mode ('smooth': a
--         sliding window; cleared: a fixed window), ordered (1: each lane serves one job at a
--         time, in mint order), dlimit / dweight / drate / dcap (the default lane ceiling,
--         weight, rate and backlog cap, as lane_limit.lua takes them), fair ('cost' or 'time':
--         fairness by work, see _fair.lua; cleared: by claims), quantum (units, or ms by time,
--         a visit grants per unit of weight, <= 10^9); an empty value clears the field.
--         Clearing `ordered` releases every lane's holder (`holders`): held lanes rejoin the
--         ring. A change of `fair` or `quantum` starts every lane's share afresh.
-- Idempotent: a field that holds its value already is not written, so applying the settings
-- in force changes nothing; a changed rate carries its window in flight on (rate_moved).
-- Returns the number of fields changed. Pushes a wake token when any did.
-- Errors  EMQARG an unknown field or a value out of bounds (every pair is checked first).
local root = KEYS[1]
local meta = root .. 'meta'
local current = redis.call('HMGET', meta, 'max', 'mode')
local new = {max = current[1] or '', mode = current[2] or ''}
local bounds = {paused = {1, 1}, concurrency = {1, 1000000}, max = {1, 1000000000},
  window = {1, 315360000000}, ordered = {1, 1}, quantum = {1, 1000000000}}
for i = 1, #ARGV, 2 do
  local field, value = ARGV[i], ARGV[i + 1]
  local bound = bounds[field]
  if field == 'mode' then
    if value ~= '' and value ~= 'smooth' then
      error({err = 'EMQARG mode ' .. value .. ': must be "smooth" or ""'})
    end
  elseif field == 'fair' then
    if value ~= '' and value ~= 'cost' and value ~= 'time' then
      error({err = 'EMQARG fair ' .. value .. ': must be "cost", "time" or ""'})
    end
  elseif string.sub(field, 1, 1) == 'd' then
    setting_arg(field, value)
  elseif not bound then
    error({err = 'EMQARG field ' .. tostring(field) .. ': unknown setting'})
  elseif value ~= '' then
    int_arg(value, field, bound[1], bound[2])
  end
  if field == 'max' or field == 'mode' then new[field] = value end
end
if new.mode == 'smooth' and new.max ~= '' and tonumber(new.max) > 10000 then
  error({err = 'EMQARG max ' .. new.max .. ': a smooth rate allows at most 10000 per window'})
end
local now, changed, rate = now_ms(), 0, false
for i = 1, #ARGV, 2 do
  local field, value = ARGV[i], ARGV[i + 1]
  if string.sub(field, 1, 1) == 'd' then
    changed = changed + set_default(root, field, value, now)
  elseif (redis.call('HGET', meta, field) or '') ~= value then
    changed = changed + 1
    if value == '' then
      redis.call('HDEL', meta, field)
    else
      redis.call('HSET', meta, field, value)
    end
    rate = rate or field == 'max' or field == 'window' or field == 'mode'
    if field == 'fair' or field == 'quantum' then
      redis.call('DEL', root .. 'gdeficit', root .. 'grun')
    end
    if field == 'ordered' and value == '' then
      local groups = redis.call('HKEYS', root .. 'holders')
      redis.call('DEL', root .. 'holders')
      for _, g in ipairs(groups) do rering(root, g) end
    end
  end
end
if rate then
  local cfg = redis.call('HMGET', meta, 'max', 'window', 'mode')
  local max = cfg[1] and cfg[2] and tonumber(cfg[1])
  local limiter, log = root .. 'limiter', root .. 'claims'
  rate_moved(limiter, log, max, tonumber(cfg[2]), cfg[3] == 'smooth', now)
end
if changed > 0 then wake(root) end
return changed
