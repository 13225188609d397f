-- complete.lua: jobs succeeded; delete their rows (completion deletes the row).
-- One call settles k jobs (k >= 1), each fenced by its own token and settled on its own.
-- KEYS[1] root   `emq:{q}:`
-- ARGV[2i-1], ARGV[2i]  id, token (the attempts value the claim returned) of job i
-- Returns one code per job, in order: 1 completed, 0 gone (no such row), -1 stale (the row
-- moved on: another claim holds it), -2 settled (this claim settled the job already: retried,
-- delayed or dead). The settle rule is `holding` in _lib.lua. Every token is checked (EMQARG)
-- before the first write.
local root = KEYS[1]
for i = 2, #ARGV, 2 do token_arg(ARGV[i]) end
local out, done = {}, 0
for i = 1, #ARGV, 2 do
  local id = ARGV[i]
  local row = root .. 'job:' .. id
  local fields, refusal = holding(row, ARGV[i + 1])
  if fields then
    detach(root, id, fields)
    delete_row(root, id, row, fields[4])
    done = done + 1
    out[#out + 1] = 1
  elseif refusal == 'stale' then
    out[#out + 1] = -1
  elseif refusal == 'settled' then
    out[#out + 1] = -2
  else
    out[#out + 1] = 0
  end
end
if done > 0 then redis.call('HINCRBY', root .. 'metrics:completed', 'count', done) end
return out
