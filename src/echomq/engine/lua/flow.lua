-- flow.lua: admit the nodes of a flow that live on this queue, all or nothing: parents wait
-- for their children (state `waiting`, in the `waiting` index, out of every lane), leaves
-- join their lanes. The host sends the parent's queue first; a node whose parent lives on
-- another queue tells it through the outbox (outbox_push in _parents.lua).
-- KEYS[1] root      `emq:{q}:`
-- ARGV, seven per node, node i at 7(i-1)+1 ..:
--   id        branded JOB id (minted host-side)
--   payload   bytes (the codec's output), at most 16 MiB
--   group     lane name (`_` = the default lane)
--   parent    the parent's JOB id, "" for the flow's root
--   parent_q  the parent's queue when it is another queue, "" for this one
--   policy    what the child's death does to its parent: "fail" (it goes dead) or "ignore"
--             (recorded in the parent's `flow:<id>:failed`, counted as done)
--   children  the node's children's ids (any queue), space-joined in flow order; "" = a leaf.
--             A parent's row keeps them (`children`) and counts them down (`deps`).
-- On a shard of a sharded queue ARGV opens with "fence" and the producer's placement epoch,
-- and each node has an eighth word, its lane's slot (0..16383): a node of a lane this shard
-- does not serve (a parent too: it joins its lane when its children are done) refuses the
-- whole call EMQMOVED, nothing written (fence_reader in _shard.lua).
-- A parent admitted here clears its `flow:<id>:expected` (set by the host when a child's queue
-- was written first): from now on its row answers its children's entries.
-- Returns {1, n} admitted (n nodes), or {0, id}: that node exists already, nothing written
-- (admitting a flow again is a duplicate).
-- Errors  EMQKIND an id is not JOB-namespaced; EMQARG a malformed node (before any write);
--         EMQMOVED a node's lane is not this shard's (nothing written).
local root = KEYS[1]
local nodes = {}
local fence = fence_reader(root, ARGV) -- nil: not a shard (ARGV holds no fence)
local first, width = 1, 7
if fence then first, width = 3, 8 end
for i = first, #ARGV, width do
  local id, policy, children = ARGV[i], ARGV[i + 5], ARGV[i + 6]
  if string.sub(id, 1, 3) ~= 'JOB' or #id ~= 14 then
    return redis.error_reply('EMQKIND job id must be a JOB id, got ' .. id)
  end
  if #ARGV[i + 1] > 16777216 then
    return redis.error_reply('EMQARG payload <' .. #ARGV[i + 1] .. ' bytes>: at most 16 MiB')
  end
  if policy ~= 'fail' and policy ~= 'ignore' then
    return redis.error_reply('EMQARG policy ' .. policy .. ': must be fail or ignore')
  end
  local n = 0
  for _ in string.gmatch(children, '%S+') do n = n + 1 end
  if n > 1000 then
    return redis.error_reply('EMQARG children <' .. n .. '>: at most 1000 per parent')
  end
  nodes[#nodes + 1] = {id, ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4], policy,
    children, n, fence and ARGV[i + 7]}
end
-- The fence before existence: every node's lane this shard's, or nothing written.
if fence then
  for _, node in ipairs(nodes) do
    local refused = fence(node[3], node[9])
    if refused then return redis.error_reply(refused) end
  end
end
-- Existence before any write: the whole call is one admission.
for _, node in ipairs(nodes) do
  if redis.call('EXISTS', root .. 'job:' .. node[1]) == 1 then return {0, node[1]} end
end
local lanes = {}
for _, node in ipairs(nodes) do
  local id, g, row = node[1], node[3], root .. 'job:' .. node[1]
  redis.call('HSET', row, 'attempts', 0, 'payload', node[2], 'group', g)
  if node[4] ~= '' then redis.call('HSET', row, 'parent', node[4]) end
  if node[5] ~= '' then redis.call('HSET', row, 'parent_q', node[5]) end
  if node[6] == 'ignore' then redis.call('HSET', row, 'policy', 'ignore') end
  if node[8] > 0 then
    redis.call('HSET', row, 'state', 'waiting', 'deps', node[8], 'children', node[7])
    redis.call('ZADD', root .. 'waiting', 0, id)
    redis.call('DEL', root .. 'flow:' .. id .. ':expected')
  else
    redis.call('HSET', row, 'state', 'pending')
    push_lane(root, g, id)
    lanes[g] = true
  end
end
local now = now_ms()
for g in pairs(lanes) do rering(root, g, now) end
return {1, #nodes}
