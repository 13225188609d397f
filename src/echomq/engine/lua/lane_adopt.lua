-- lane_adopt.lua: on a lane's target shard, adopt the lane held, or release it (a lane move,
-- docs/concepts/shards.md "Moving a lane", steps 1 and 5).
-- KEYS[1] root   `emq:{q~k}:` (the target shard)
-- ARGV[1] group  the lane
-- ARGV[2] from   the source shard's index (0..4095): adopt, held; "": release
-- Adopting: `adopted[lane] = from`, so the fence admits the lane's enqueues here while
-- serviceable() keeps it off the ring; `moved[lane] = from` too (replacing what an earlier move
-- off this shard left there), so the fence reads `adopted` even where this shard owns the
-- lane's slot, and refuses an item of the held lane until its producer has looked at the
-- source's dedup keys and ids (_shard.lua, enqueue.lua). Releasing: `moved` forgets it, `adopted[lane]
-- = ""`, and the lane joins the ring if serviceable (with a wake token), or is benched for its
-- rate window or cool.
-- Returns 1 done, 0 (adopt) the lane was released here already: the move is over.
local root, g, from = KEYS[1], ARGV[1], ARGV[2]
if from ~= '' then
  int_arg(from, 'from', 0, 4095)
  if redis.call('HGET', root .. 'adopted', g) == '' then return 0 end
  redis.call('HSET', root .. 'moved', g, from)
  redis.call('HSET', root .. 'adopted', g, from)
  dering(root, g)
  return 1
end
redis.call('HDEL', root .. 'moved', g)
redis.call('HSET', root .. 'adopted', g, '')
rering(root, g, now_ms())
return 1
