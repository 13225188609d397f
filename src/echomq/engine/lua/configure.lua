-- configure.lua: set or clear queue-wide settings in `meta` (pause, concurrency, rate limit,
-- ordered lanes).
-- KEYS[1] root   `emq:{q}:`
-- ARGV    field, value pairs; fields: paused (1), concurrency (jobs, <= 10^6), max (jobs per
--         window, <= 10^9), window (ms, <= 10 years), ordered (1: each lane serves one job
--         at a time, in mint order); an empty value clears the field. Clearing `ordered`
--         releases every lane's holder (`holders`): held lanes rejoin the ring.
-- Returns 1. Pushes a wake token, since any change may let parked consumers claim again.
-- Errors  EMQARG an unknown field or a value out of bounds (every pair is checked first).
local root = KEYS[1]
local meta = root .. 'meta'
local bounds = {paused = {1, 1}, concurrency = {1, 1000000}, max = {1, 1000000000},
  window = {1, 315360000000}, ordered = {1, 1}}
for i = 1, #ARGV, 2 do
  local field, value = ARGV[i], ARGV[i + 1]
  local bound = bounds[field]
  if not bound then error({err = 'EMQARG field ' .. tostring(field) .. ': unknown setting'}) end
  if value ~= '' then int_arg(value, field, bound[1], bound[2]) end
end
for i = 1, #ARGV, 2 do
  local field, value = ARGV[i], ARGV[i + 1]
  if value == '' then
    redis.call('HDEL', meta, field)
  else
    redis.call('HSET', meta, field, value)
  end
  if field == 'max' or field == 'window' then redis.call('DEL', root .. 'limiter') end
  if field == 'ordered' and value == '' then
    local groups = redis.call('HKEYS', root .. 'holders')
    redis.call('DEL', root .. 'holders')
    for _, g in ipairs(groups) do rering(root, g) end
  end
end
wake(root)
return 1
