-- extend.lua: push the lease deadline of held jobs to now + lease (one TIME for all).
-- KEYS[1] root      `emq:{q}:`
-- ARGV[1] lease     ms from now; > 0
-- ARGV[2k], ARGV[2k+1]  id, token pairs
-- Returns one code per pair, in order: 1 extended, 0 gone (no row, or this claim settled it
-- already), -1 stale token (another claim holds it). The settle rule is `held` in _settle.lua: a
-- job reaped but not claimed since is leased back to its holder, which is alive after all.
local root = KEYS[1]
local lease = int_arg(ARGV[1], 'lease', 1, 86400000)
for i = 3, #ARGV, 2 do token_arg(ARGV[i]) end
local now = now_ms()
local deadline = now + lease
local active = root .. 'active'
local out, touched = {}, {}
for i = 2, #ARGV, 2 do
  local id, token = ARGV[i], ARGV[i + 1]
  local row = root .. 'job:' .. id
  local fields, refusal = holding(row, token)
  if refusal == 'stale' then
    out[#out + 1] = -1
  elseif not fields then
    out[#out + 1] = 0
  else
    if fields[2] == 'pending' then
      local g = fields[3] or '_'
      if redis.call('ZREM', lane_of(root, g), id) == 1 then lane_shrank(root, g) end
      redis.call('HSET', row, 'state', 'active')
      redis.call('HINCRBY', root .. 'gactive', g, 1)
      extra_moved(root, g, fields[9], 1)
      touched[g] = true
    end
    redis.call('ZADD', active, deadline, id)
    out[#out + 1] = 1
  end
end
for g in pairs(touched) do rering(root, g, now) end
return out
