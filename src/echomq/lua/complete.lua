-- complete.lua: the job succeeded; delete its row (completion deletes the row).
-- KEYS[1] root   `emq:{q}:`
-- ARGV[1] id     the job id
-- ARGV[2] token  the attempts value the claim returned (fencing token)
-- Returns 1 completed, 0 gone (no such row).
-- Errors  EMQSTALE the row moved on (another claim holds it); EMQSTATE the job is dead.
local root = KEYS[1]
local id, token = ARGV[1], ARGV[2]
local row = root .. 'job:' .. id

local fields = fenced(row, token, 'complete')
if not fields then return 0 end
if fields[2] == 'dead' then
  return redis.error_reply('EMQSTATE complete refused: job ' .. id .. ' is dead')
end
detach(root, id, fields)
delete_row(root, id, row, fields[4])
redis.call('HINCRBY', root .. 'metrics:completed', 'count', 1)
return 1
