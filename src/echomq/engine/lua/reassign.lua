-- reassign.lua: move a pending job to another lane (urgency is a lane, not a priority number).
-- KEYS[1] root   `emq:{q}:`
-- ARGV[1] id     the job id
-- ARGV[2] group  the destination lane
-- On a shard of a sharded queue ARGV is "fence", the producer's placement epoch, then id,
-- group and the destination lane's slot (0..16383): a lane this shard does not serve is
-- refused (fence_reader in _shard.lua).
-- Returns 1 moved, 2 already there, 0 gone.
-- Errors  EMQSTATE the job is not pending in a lane; EMQMOVED the destination lane is not this
--         shard's (nothing written).
local root = KEYS[1]
local fence = fence_reader(root, ARGV) -- nil: not a shard (ARGV holds no fence)
local at = fence and 2 or 0
local id, dst = ARGV[at + 1], ARGV[at + 2]
local row = root .. 'job:' .. id
local fields = redis.call('HMGET', row, 'state', 'group')
if not fields[1] then return 0 end
if fields[1] ~= 'pending' then
  return redis.error_reply('EMQSTATE reassign refused: job ' .. id .. ' is ' .. fields[1])
end
local src = fields[2] or '_'
if src == dst then return 2 end
if fence then
  local refused = fence(dst, ARGV[at + 3])
  if refused then return redis.error_reply(refused) end
end
local now = now_ms()
redis.call('ZREM', lane_of(root, src), id)
lane_shrank(root, src)
redis.call('HSET', row, 'group', dst)
push_lane(root, dst, id)
rering(root, dst, now)
return 1
