-- _lib.lua: helpers every transition shares: its arguments checked, the server clock, and the
-- keys of a lane that the other libraries build on. A library (its name starts with "_"): the
-- registry prepends the helpers a transition calls, each after those it calls
-- (engine/scripts.py). Every key is derived from the queue root `emq:{q}:` each script receives
-- as KEYS[1], so all stay on one slot.

-- ARGV value `value` as an integer in [lo, hi]; else nil and the EMQARG refusal naming `name`
-- (a batch script answers it for the one item instead of failing the call).
local function int_or_refusal(value, name, lo, hi)
  local n = tonumber(value)
  if not n or n ~= n or n % 1 ~= 0 or n < lo or n > hi then
    return nil, string.format('EMQARG %s %s: must be an integer in [%.0f, %.0f]', name,
      tostring(value), lo, hi)
  end
  return n
end

-- ARGV value `value` as an integer in [lo, hi], or an EMQARG refusal naming `name`. Every
-- script checks its numbers with it before its first write, so a refused call writes nothing.
-- The bounds are the host's (engine/checks.py); Lua numbers are doubles, exact to 2^53.
local function int_arg(value, name, lo, hi)
  local n, refusal = int_or_refusal(value, name, lo, hi)
  if refusal then error({err = refusal}) end
  return n
end

-- A duration in ms: at most 10 years (MAX_DURATION).
local function ms_arg(value, name, lo)
  return int_arg(value, name, lo, 315360000000)
end

-- A fencing token (a job's attempts).
local function token_arg(value)
  return int_arg(value, 'token', 1, 9007199254740991)
end

-- Server clock in ms: leases, delays and windows never use a host clock.
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- A lane: the pending job ids of one group, scored by priority band (0 for the default band:
-- see push_lane), so within a band byte order = mint order.
local function lane_of(root, g)
  return root .. 'g:' .. g .. ':pending'
end

-- A job's log: its newest lines, oldest first (progress.lua); it lives as long as the row.
local function log_of(root, id)
  return root .. 'log:' .. id
end

-- The fixed-window rate counter of one lane.
local function lane_limiter_of(root, g)
  return root .. 'g:' .. g .. ':limiter'
end

-- One wake token per readiness event; parked consumers BLPOP the list. Capped at 64.
local function wake(root)
  redis.call('LPUSH', root .. 'wake', '1')
  redis.call('LTRIM', root .. 'wake', 0, 63)
end

-- A lane's sliding log (smooth rates): the server ms of its newest claims, oldest first (the
-- newest `max` decide; it holds at most twice that).
local function lane_claims_of(root, g)
  return root .. 'g:' .. g .. ':claims'
end
