-- configure.lua: set or clear queue-wide settings in `meta` (pause, concurrency, rate limit).
-- KEYS[1] root   `emq:{q}:`
-- ARGV    field, value pairs; fields: paused (1), concurrency (jobs), max (jobs), window (ms);
--         an empty value clears the field.
-- Returns 1. Pushes a wake token, since any change may let parked consumers claim again.
local root = KEYS[1]
local meta = root .. 'meta'
for i = 1, #ARGV, 2 do
  local field, value = ARGV[i], ARGV[i + 1]
  if value == '' then
    redis.call('HDEL', meta, field)
  else
    redis.call('HSET', meta, field, value)
  end
  if field == 'max' or field == 'window' then redis.call('DEL', root .. 'limiter') end
end
wake(root)
return 1
