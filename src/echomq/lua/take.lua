-- take.lua: take tokens from several token buckets at once, all or none (server clock).
-- KEYS[i]       bucket i (HASH: tokens, at); all keys share the caller's hash tag
-- ARGV[1]       cost: tokens to take from every bucket; > 0
-- ARGV[2i], ARGV[2i+1]  rate (tokens per second, > 0) and burst (capacity, >= 1) of bucket i
-- Returns {0, now_ms} when every bucket paid the cost; otherwise {n, now_ms} with n > 0 the
-- smallest wait in ms after which the same take could succeed (nothing is debited then).
-- Buckets start full, refill lazily at `rate`, and expire once idle long enough to be full.
local cost = tonumber(ARGV[1])
local now = now_ms()
local levels, wait = {}, 0
for i, key in ipairs(KEYS) do
  local rate, burst = tonumber(ARGV[2 * i]), tonumber(ARGV[2 * i + 1])
  local state = redis.call('HMGET', key, 'tokens', 'at')
  local tokens = burst
  if state[1] then
    tokens = math.min(burst, tonumber(state[1]) + (now - tonumber(state[2])) * rate / 1000)
  end
  levels[i] = tokens
  if tokens < cost then
    wait = math.max(wait, math.ceil((cost - tokens) * 1000 / rate))
  end
end
if wait > 0 then return {wait, now} end
for i, key in ipairs(KEYS) do
  local rate, burst = tonumber(ARGV[2 * i]), tonumber(ARGV[2 * i + 1])
  -- %.17g keeps every bit of the level: a rounded level would drift the long-run rate.
  redis.call('HSET', key, 'tokens', string.format('%.17g', levels[i] - cost), 'at', now)
  redis.call('PEXPIRE', key, math.ceil(burst * 1000 / rate) + 1000)
end
return {0, now}
