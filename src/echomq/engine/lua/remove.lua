-- remove.lua: delete a job that is not leased (pending, scheduled, dead or a kept result).
-- KEYS[1] root  `emq:{q}:`
-- ARGV[1] id    the job id
-- Returns 1 removed, 0 gone.
-- Errors  EMQLOCK the job is leased by a worker (untouched).
-- The id is announced on the shard channel `done` (a wait on it answers None); a dedup key
-- with a TTL of its own outlives the row (delete_row in _ends.lua).
local root, id = KEYS[1], ARGV[1]
local row = root .. 'job:' .. id
local fields = read_row(row)
if not fields[2] then return 0 end
if fields[2] == 'active' then
  return redis.error_reply('EMQLOCK job ' .. id .. ' is leased by a worker')
end
detach(root, id, fields)
delete_row(root, id, row, fields[4])
announce(root, {id})
return 1
