-- _served.lua: the measured claim rates behind ETAs: what each claim leased, counted per lane and
-- folded into a moving rate. A library: each transition gets the helpers it calls
-- (engine/scripts.py).

-- Measured claim rates, for ETAs (eta.lua reads them). The claim counts what it leased in
-- `served` (HINCRBY: the queue's under "", each lane's under its name) and every FOLD_EVERY
-- claims folds the counts into `rates`: per field "rate:at:since", rate an exponentially
-- decayed count of claims in claims/s (time constant 5 s: eta.SERVED_TAU) as of server ms
-- `at`, since the ms this spell of claiming began (a minute without claims starts a new one).
-- The queue's `at` is when the counts in `served` began: they are spread evenly from it.
-- One HINCRBY per lane served, and the fold's few commands once per FOLD_EVERY claims.
local function rate_after(old, now, last, n)
  local rate, since = 0, last
  if old then
    local r, at, from = string.match(old, '^([^:]+):([^:]+):([^:]+)$')
    if now - tonumber(at) < 60000 then
      rate, since = tonumber(r) * math.exp((tonumber(at) - now) / 5000), tonumber(from)
    end
  end
  local span = (now - last) / 1000
  if span > 0 then
    rate = rate + n / span * (1 - math.exp(-span / 5))
  else
    rate = rate + n / 5
  end
  -- string.format, not `..`: a number's tostring costs ten times as much.
  return string.format('%.6g:%d:%d', rate, now, since)
end

local function count_claims(root, now, taken)
  local served, rates = root .. 'served', root .. 'rates'
  local total = redis.call('HINCRBY', served, '', taken)
  if total == taken then
    -- The first count since the last fold: the counts begin now (nothing was claimed since
    -- the fold), so the queue's rate is carried to now, its `at` the counts' start.
    redis.call('HSET', rates, '', rate_after(redis.call('HGET', rates, ''), now, now, 0))
  end
  if total < 64 then return end -- FOLD_EVERY
  local counts = redis.call('HGETALL', served)
  redis.call('DEL', served)
  local names = {}
  for i = 1, #counts, 2 do names[#names + 1] = counts[i] end
  local last = tonumber(string.match(redis.call('HGET', rates, '') or '', '^[^:]+:([^:]+)'))
  local old = redis.call('HMGET', rates, unpack(names))
  local out = {}
  for i, name in ipairs(names) do
    out[#out + 1] = name
    out[#out + 1] = rate_after(old[i], now, last or now, tonumber(counts[2 * i]))
  end
  redis.call('HSET', rates, unpack(out))
  -- A few fields at random a minute old go, so the hash holds about the lanes served lately.
  local picked = redis.call('HRANDFIELD', rates, 4, 'WITHVALUES')
  for i = 1, #picked, 2 do
    if now - tonumber(string.match(picked[i + 1], '^[^:]+:([^:]+)')) >= 60000 then
      redis.call('HDEL', rates, picked[i])
    end
  end
end
