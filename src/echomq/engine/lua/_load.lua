-- _load.lua: a shard's load, carried by a sharded queue's claim reply (docs/concepts/shards.md,
-- "Visiting the shards"): the visit that changed it reports it, so a worker's stride hears of
-- it at once. It builds on nothing but the server.

-- Append to the claim's reply `out` the shard's load after the claim and when its first
-- rate-benched lane returns: its most urgent band with a ringed lane (-1: none), that band's
-- active weight W_s (`ringweight`: own:<band> plus count:<band> x the default lane weight
-- `dweight`, meta as read; none: 1), and the score of `rdue`'s first lane (server ms; -1: none).
-- Two reads (HGETALL of at most two fields per band, ZRANGE of one).
local function append_load(root, out, dweight)
  local default, weights, top = tonumber(dweight or '1'), {}, -1
  local counters = redis.call('HGETALL', root .. 'ringweight')
  for i = 1, #counters, 2 do
    local kind, band = string.match(counters[i], '^(%a+):(%d)$')
    band = tonumber(band)
    local w = tonumber(counters[i + 1]) * (kind == 'count' and default or 1)
    weights[band] = (weights[band] or 0) + w
  end
  for band, w in pairs(weights) do
    if w > 0 and band > top then top = band end
  end
  local due = redis.call('ZRANGE', root .. 'rdue', 0, 0, 'WITHSCORES')[2]
  local o = #out
  out[o + 1], out[o + 2], out[o + 3] = top, weights[top] or 0, tonumber(due or '-1')
end
