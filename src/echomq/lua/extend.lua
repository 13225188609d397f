-- extend.lua: push the lease deadline of leased jobs to now + lease (one TIME for all).
-- KEYS[1] root      `emq:{q}:`
-- ARGV[1] lease     ms from now; > 0
-- ARGV[2k], ARGV[2k+1]  id, token pairs
-- Returns one code per pair, in order: 1 extended, 0 gone (no row or not leased), -1 stale token.
local root = KEYS[1]
local deadline = now_ms() + tonumber(ARGV[1])
local active = root .. 'active'
local out = {}
for i = 2, #ARGV, 2 do
  local id, token = ARGV[i], ARGV[i + 1]
  local attempts = redis.call('HGET', root .. 'job:' .. id, 'attempts')
  if not attempts then
    out[#out + 1] = 0
  elseif attempts ~= token then
    out[#out + 1] = -1
  elseif redis.call('ZSCORE', active, id) then
    redis.call('ZADD', active, deadline, id)
    out[#out + 1] = 1
  else
    out[#out + 1] = 0
  end
end
return out
