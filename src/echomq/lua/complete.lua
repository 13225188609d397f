-- complete.lua: the job succeeded; delete its row (completion deletes the row).
-- KEYS[1] root   `emq:{q}:`
-- ARGV[1] id     the job id
-- ARGV[2] token  the attempts value the claim returned (fencing token)
-- Returns 1 completed, 0 gone (no such row).
-- Errors  EMQSTALE the row moved on (another claim holds it); EMQSTATE this claim settled the
--         job already (retried, delayed or dead). The settle rule is `held` in _lib.lua.
local root = KEYS[1]
local id, token = ARGV[1], ARGV[2]
token_arg(token)
local row = root .. 'job:' .. id

local fields = held(row, token, 'complete')
if not fields then return 0 end
detach(root, id, fields)
delete_row(root, id, row, fields[4])
redis.call('HINCRBY', root .. 'metrics:completed', 'count', 1)
return 1
