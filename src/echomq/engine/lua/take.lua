-- take.lua: take tokens from several token buckets at once, all or none (server clock).
-- KEYS[i]       bucket i (HASH: tokens, at); all keys share the caller's hash tag
-- ARGV[1]       cost: tokens to take from every bucket; > 0
-- ARGV[2i], ARGV[2i+1]  rate (tokens per second, > 0) and burst (capacity, >= 1) of bucket i
-- Returns {0, now_ms} when every bucket paid the cost; otherwise {n, now_ms} with n > 0 the
-- smallest wait in ms after which the same take could succeed (nothing is debited then).
-- Buckets start full, refill lazily at `rate`, and expire once idle long enough to be full.
-- Errors  EMQARG a cost, rate or burst out of bounds (checked before any write).
local cost = int_arg(ARGV[1], 'cost', 1, 1000000000)
for i = 1, #KEYS do
  local rate = tonumber(ARGV[2 * i])
  if not rate or rate ~= rate or rate <= 0 or rate > 1000000000 then
    error({err = 'EMQARG rate ' .. tostring(ARGV[2 * i]) .. ': must be in (0, 10^9] per second'})
  end
  -- The idle expiry below is one full refill: it must stay a valid PEXPIRE.
  if int_arg(ARGV[2 * i + 1], 'burst', 1, 1000000000) * 1000 / rate > 315360000000 then
    error({err = 'EMQARG rate ' .. ARGV[2 * i] .. ': a full refill takes over 10 years'})
  end
end
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
