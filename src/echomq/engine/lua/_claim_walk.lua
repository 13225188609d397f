-- _claim_walk.lua: the claim's walk (claim.lua) over the bands' rings (_ring.lua): the most
-- urgent band's ring first, each served from its head one lane's turn at a time (serve_turn in
-- _claim_turn.lua), then the next band's, on the same lease, until the claim is full. `c` is
-- the claim's state (claim.lua). A library: each transition gets the helpers it calls
-- (engine/scripts.py).

-- Lane g leaves the head of band `band`'s ring (its key `ring`, its turn `turn`).
local function off_ring(root, c, ring, turn, band, g)
  redis.call('LPOP', ring)
  ring_count(root, g, band, -1, c.lanes[g].own)
  redis.call('DEL', turn)
  if band ~= 5 then redis.call('HDEL', root .. 'gband', g) end
  if c.ringlen then c.ringlen = c.ringlen - 1 end
  c.left = true
end

-- g (at the head of this band's ring) moves to band p's ring, which this walk visits in turn.
local function move_band(root, c, ring, turn, band, g, p)
  off_ring(root, c, ring, turn, band, g)
  ring_join(root, g, p)
  if c.listed[p] then return end
  c.listed[p] = true
  local bands = c.bands
  local at = #bands + 1
  while at > 1 and bands[at - 1] < p do at = at - 1 end
  table.insert(bands, at, p)
end

-- Serve band `band`'s ring until the claim is full or the ring is empty. Returns true while
-- the ring holds a lane. Each turn leases at least one job, takes a lane off the ring or is
-- one of DRY dry visits (by work), so the walk ends.
local function walk_ring(root, c, ring, turn, band)
  c.ringlen = nil -- the ring's length, once a turn read it
  while c.taken < c.want do
    local g = redis.call('LINDEX', ring, 0)
    if not g then return false end
    c.taken = c.taken + serve_turn(root, c, ring, turn, band, g, c.want - c.taken)
  end
  return true
end

-- Walk the bands in use, most urgent first (c.bands; a turn may add one, in its place).
local function walk_bands(root, c)
  local bands, at = c.bands, 1
  while c.taken < c.want and at <= #bands do
    local band = bands[at]
    if band == 5 then
      walk_ring(root, c, root .. 'ring', root .. 'turn', band)
    elseif not walk_ring(root, c, root .. 'band:' .. band .. ':ring',
        root .. 'band:' .. band .. ':turn', band) then
      -- Its ring is empty: it leaves meta `bands` (read again: this walk may have added one).
      local left_bands = string.gsub(redis.call('HGET', root .. 'meta', 'bands') or '', band, '')
      if left_bands == '' then
        redis.call('HDEL', root .. 'meta', 'bands')
      else
        redis.call('HSET', root .. 'meta', 'bands', left_bands)
      end
    end
    at = at + 1
  end
end
