-- _ring.lua: the rings of priority bands: which band's ring holds a lane, joining and leaving one
-- (with the ring-weight counters a sharded queue's workers read), and the law "on the ring of its
-- head's band iff serviceable" restored after any change. A library: each transition gets the
-- helpers it calls (engine/scripts.py).

-- Priority bands. A job's priority p (0..9, higher = more urgent; default 5) is its score in
-- its lane: 5 - p, so the default band scores 0 (byte order = mint order within a score) and a
-- lane serves its jobs by priority, then mint order. A lane sits on the ring of its head job's
-- band: `ring` for the default band (the one key a queue without priorities ever uses),
-- `band:<p>:ring` for the others, each with its own `turn` (`turn`, `band:<p>:turn`). `gband`
-- maps a lane on another band's ring to that band; meta `bands` holds the other bands whose
-- ring may be non-empty, their digits most urgent first (read by the claim with its settings;
-- claim.lua drops one it finds empty).
-- meta `banded` marks a queue that admitted a job outside the default band: the claim walks
-- bands and watches head bands only then. (The scripts spell the default band 5: the linker
-- copies only functions.)
-- The band of lane g's head job (the default for an empty lane).
local function head_band(root, g)
  local head = redis.call('ZRANGE', lane_of(root, g), 0, 0, 'WITHSCORES')
  return 5 - tonumber(head[2] or '0')
end

-- The band whose ring holds g now, or nil when g is on no ring.
local function ring_band(root, g)
  local p = redis.call('HGET', root .. 'gband', g)
  if p then return tonumber(p) end
  if redis.call('LPOS', root .. 'ring', g) then return 5 end
  return nil
end

-- The ring-weight counters (`ringweight`: a sharded queue's workers visit each shard in
-- proportion to its active weight, docs/concepts/shards.md): per band p, own:<p> sums the own
-- weights (gweight) of the lanes on p's ring that have one, count:<p> counts those on the
-- default weight, so a change of the default writes nothing. g joined band p's ring (`sign`
-- 1) or left it (-1); a field back at 0 goes, so a queue with no ringed lane has no key.
-- `own`: g's gweight when the caller read it already (false: none), nil to read it here.
local function ring_count(root, g, p, sign, own)
  local key, w = root .. 'ringweight', own
  if w == nil then w = redis.call('HGET', root .. 'gweight', g) end
  local field = w and 'own:' .. p or 'count:' .. p
  if redis.call('HINCRBY', key, field, sign * (w or 1)) == 0 then
    redis.call('HDEL', key, field)
  end
end

-- Put g (on no ring) at the tail of band p's ring.
local function ring_join(root, g, p)
  ring_count(root, g, p, 1)
  if p == 5 then
    redis.call('RPUSH', root .. 'ring', g)
    return
  end
  redis.call('RPUSH', root .. 'band:' .. p .. ':ring', g)
  redis.call('HSET', root .. 'gband', g, p)
  local meta = root .. 'meta'
  local bands = redis.call('HGET', meta, 'bands') or ''
  if not string.find(bands, tostring(p), 1, true) then
    local digits = {p}
    for d in string.gmatch(bands, '%d') do digits[#digits + 1] = tonumber(d) end
    table.sort(digits, function(a, b) return a > b end)
    redis.call('HSET', meta, 'bands', table.concat(digits))
  end
end

-- Take g off `ring` (a band's ring, `turn` its turn). A lane leaving mid-turn forfeits the
-- rest of its turn, so a stale `turn` count cannot shorten its next visit. Returns whether g
-- was on it.
local function leave(ring, turn, g)
  if redis.call('LREM', ring, 0, g) == 0 then return false end
  if redis.call('HGET', turn, 'group') == g then redis.call('DEL', turn) end
  return true
end

-- Take g off band p's ring (nothing when it is not on it).
local function ring_leave(root, g, p)
  local was
  if p == 5 then
    was = leave(root .. 'ring', root .. 'turn', g)
  else
    redis.call('HDEL', root .. 'gband', g)
    was = leave(root .. 'band:' .. p .. ':ring', root .. 'band:' .. p .. ':turn', g)
  end
  if was then ring_count(root, g, p, -1) end
end

-- The bands a claim walks, most urgent first: those of meta `bands` (`text`, as read) and the
-- default. Returns the list and the set of its members.
local function bands_in_use(text)
  local bands, listed = {}, {}
  for p in string.gmatch(text or '', '%d') do
    p = tonumber(p)
    if p < 5 and not listed[5] then
      bands[#bands + 1], listed[5] = 5, true
    end
    bands[#bands + 1], listed[p] = p, true
  end
  if not listed[5] then
    bands[#bands + 1], listed[5] = 5, true
  end
  return bands, listed
end

-- Whether the ring of any band of `bands` holds a lane.
local function any_ringed(root, bands)
  for _, p in ipairs(bands) do
    if p == 5 then
      if redis.call('LLEN', root .. 'ring') > 0 then return true end
    elseif redis.call('LLEN', root .. 'band:' .. p .. ':ring') > 0 then
      return true
    end
  end
  return false
end

-- Take g off whichever ring holds it.
local function dering(root, g)
  local p = redis.call('HGET', root .. 'gband', g)
  ring_leave(root, g, p and tonumber(p) or 5)
end

-- Lane g's head job may have changed band (a job joined or left the lane): a lane on a ring
-- moves to the tail of its head's band's ring.
local function reband(root, g)
  local at = ring_band(root, g)
  if not at then return end
  local p = head_band(root, g)
  if p ~= at then
    ring_leave(root, g, at)
    ring_join(root, g, p)
  end
end

-- Restore the law "on the ring of its head's band iff serviceable" for g after any change that
-- may affect it: ring it (with a wake token) when it became serviceable or changed band,
-- de-ring it when it stopped.
local function rering(root, g, now)
  if serviceable(root, g) then
    local at, p = ring_band(root, g), head_band(root, g)
    if at == p then return end
    if at then ring_leave(root, g, at) end
    ring_join(root, g, p)
    wake(root)
  else
    dering(root, g)
    if now then bench(root, g, now) end
  end
end

-- End lane g's cool now (uncool, resume): it rejoins the ring if serviceable, or is benched
-- for its rate window. Returns 1 when it was cooling, else 0.
local function uncool_lane(root, g, now)
  local was = lane_cool_wait(root, g, now) > 0 and 1 or 0
  if was == 1 then
    redis.call('HDEL', root .. 'cooling', g)
    redis.call('ZREM', root .. 'rdue', g)
    rering(root, g, now)
  end
  return was
end
