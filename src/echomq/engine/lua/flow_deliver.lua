-- flow_deliver.lua: tell waiting parents of this queue that children on other queues settled;
-- the relay's delivery of outbox entries (outbox_push in _parents.lua), run on the parent's slot.
-- At least once: an entry delivered again (a relay that crashed before removing it from its
-- outbox, two relays at once) is counted once, by the guard of tell_parent in _parents.lua.
-- KEYS[1] root      `emq:{q}:` of the parents' queue
-- ARGV, six per entry, entry i at 6(i-1)+1 ..:
--   parent    the parent's JOB id
--   child     the child's JOB id
--   ok        1 the child completed (value = its result bytes), 0 it went dead (value = error)
--   policy    the child's failure policy: "ignore", or "" (its death fails the parent)
--   at        server ms the entry was appended to its outbox
--   value     the result or the error, at most 16 MiB
-- Returns one code per entry, in order: 1 counted, 0 done with (told before, the parent is no
-- longer waiting, or it has no row: removed, drained, cancelled or expired), -1 keep it: no
-- parent row yet, the parent is expected (`flow:<id>:expected`, set by the host before it
-- admits a flow whose queues nest both ways: a child's queue is written before its parent's)
-- and the entry is younger than 60 s.
-- Errors  EMQARG a malformed entry (before any write).
local root = KEYS[1]
for i = 1, #ARGV, 6 do
  int_arg(ARGV[i + 2], 'ok', 0, 1)
  int_arg(ARGV[i + 4], 'at', 0, 9007199254740991)
  if #ARGV[i + 5] > 16777216 then
    return redis.error_reply('EMQARG value <' .. #ARGV[i + 5] .. ' bytes>: at most 16 MiB')
  end
  for _, id in ipairs({ARGV[i], ARGV[i + 1]}) do
    if string.sub(id, 1, 3) ~= 'JOB' or #id ~= 14 then
      return redis.error_reply('EMQKIND job id must be a JOB id, got ' .. id)
    end
  end
end
local now = now_ms()
local out = {}
for i = 1, #ARGV, 6 do
  local told = tell_parent(root, ARGV[i], ARGV[i + 1], ARGV[i + 2] == '1', ARGV[i + 5],
    ARGV[i + 3])
  if told == -1 and (now - tonumber(ARGV[i + 4]) >= 60000
      or redis.call('EXISTS', root .. 'flow:' .. ARGV[i] .. ':expected') == 0) then
    told = 0
  end
  out[#out + 1] = told
end
return out
