-- node.lua: lease, renew or release a node of the id space (the 10-bit field of every minted
-- id), deployment-wide, so no two live minters share one (docs/reference/bounds.md, "Ids").
-- KEYS[1] nodes    `{emq}:nodes` (HASH: node -> "owner:expires_ms:ceiling")
-- ARGV[1] op       'lease' | 'renew' | 'release'
-- ARGV[2] owner    the holder's random token (hex)
-- ARGV[3] node     renew/release: the node held; lease: the node to prefer, or -1
-- ARGV[4] ttl      ms the lease lasts from now (server clock), 1 000..3 600 000
-- ARGV[5] ceiling  the highest id timestamp (ms since the id epoch) the holder may mint; on
--                  release, the last one it minted
-- ARGV[6] start    lease: where the search for a never-used node begins (spreads holders)
-- Returns lease {node, floor}: the holder mints ids with timestamps above `floor`, the
--         previous holder's ceiling (0 when the node is new or was ours);
--         renew 1, or 0 when another holder has the node now; release 1.
-- Errors  EMQNODES every node is leased; EMQARG an argument out of bounds.
-- A node is taken over only once its lease ended: a holder stops minting before its expiry
-- by its own clock, and the ceiling keeps a new holder's ids above every id the old one minted.
local key, op, owner = KEYS[1], ARGV[1], ARGV[2]
local node = int_arg(ARGV[3], 'node', -1, 1023)
local ttl = int_arg(ARGV[4], 'ttl', 1000, 3600000)
local ceiling = int_arg(ARGV[5], 'ceiling', 0, 2199023255551)
local start = int_arg(ARGV[6], 'start', 0, 1023)
if not string.match(owner, '^%x+$') then error({err = 'EMQARG owner: must be hex'}) end
local now = now_ms()

local function parse(entry)
  if not entry then return nil, 0, 0 end
  local who, expires, top = string.match(entry, '^(%x*):(%d+):(%d+)$')
  return who, tonumber(expires), tonumber(top)
end

local function grant(n, top)
  local entry = string.format('%s:%.0f:%.0f', owner, now + ttl, math.max(top, ceiling))
  redis.call('HSET', key, n, entry)
end

if op == 'renew' then
  local who, _, top = parse(redis.call('HGET', key, node))
  if who and who ~= owner and who ~= '' then return 0 end
  grant(node, top)
  return 1
elseif op == 'release' then
  local who = parse(redis.call('HGET', key, node))
  if who == owner then
    redis.call('HSET', key, node, string.format(':%.0f:%.0f', now, ceiling))
  end
  return 1
elseif op ~= 'lease' then
  error({err = 'EMQARG op ' .. tostring(op) .. ': must be lease, renew or release'})
end

local entries = {}
local flat = redis.call('HGETALL', key)
for i = 1, #flat, 2 do entries[tonumber(flat[i])] = flat[i + 1] end
local function free(n)
  local who, expires = parse(entries[n])
  return not who or who == owner or expires <= now
end
-- The preferred node; else one never used; else the one whose lease ended longest ago.
local pick
if node >= 0 and free(node) then pick = node end
if not pick then
  for i = 0, 1023 do
    local n = (start + i) % 1024
    if not entries[n] then pick = n break end
  end
end
if not pick then
  local oldest
  for n, entry in pairs(entries) do
    local _, expires = parse(entry)
    if expires <= now and (not oldest or expires < oldest) then pick, oldest = n, expires end
  end
end
if not pick then
  return redis.error_reply('EMQNODES all 1024 nodes are leased by live minters')
end
local who, _, top = parse(entries[pick])
grant(pick, top)
if who == owner then return {pick, 0} end
return {pick, top}
