-- _shard.lua: the fence of a shard of a sharded queue (docs/concepts/shards.md, "The fence").
-- An admission sent to a shard (enqueue.lua, flow.lua, reassign.lua) opens its ARGV with the
-- word "fence" and the producer's placement epoch, and carries after each item the lane slot of
-- its lane (crc16 of the lane mod 16384, computed by the producer); an unsharded queue's call
-- carries none of it and pays nothing. The shard serves a lane when `adopted` holds it, or when
-- `owns` has its slot's bit set and `moved` does not hold it, or (while S grows) when its slot
-- is migrating and the lane still has jobs here, or importing; an item of a lane it does not
-- serve is refused, and nothing of it written.

-- The fence of one call: nil when ARGV does not open with "fence" or "fence checked" (an
-- unsharded queue); else a function (lane, slot word) answering nil when this shard serves the
-- lane, or the item's refusal: EMQARG for a slot out of 0..16383, else "EMQMOVED <to> epoch
-- <e>, sent at <p>: lane <lane>" (to: the shard `moved` names, "?" when none does; e: this
-- shard's placement epoch, meta `epoch`; p: the producer's). A second value names the source
-- of a lane held here for a move (`adopted`: lane_adopt.lua marks it in `moved` too, so the
-- owned path below sends it here), unless the call opens "fence checked" (the producer
-- looked at that source's dedup keys and ids: enqueue.lua). A lane's fence is read once per
-- call: two reads (GETBIT owns, HEXISTS moved) for a lane the shard owns. The epoch is checked before
-- any write (EMQARG epoch fails the call).
-- While the shard count grows (docs/concepts/shards.md, "Changing S"), a lane this shard's
-- `owns` does not name and no `moved` or `adopted` entry fences: nil when this shard serves it
-- (a migrating slot's lane it still holds: jobs pending, leased or scheduled here; an
-- importing slot's lane), else the shard to refuse it toward (`migrating` byte `slot`: the
-- target's index; "?" when the slot is neither). Read only off the owned path, so a shard
-- whose slots are not moving pays nothing for it.
local function handing(root, g, slot)
  local target = string.byte(redis.call('GETRANGE', root .. 'migrating', slot, slot))
  if target and target > 0 then
    if redis.call('ZCARD', lane_of(root, g)) > 0
        or redis.call('HEXISTS', root .. 'gactive', g) == 1
        or redis.call('HEXISTS', root .. 'gscheduled', g) == 1 then
      return nil
    end
    return tostring(target)
  end
  if redis.call('GETBIT', root .. 'importing', slot) == 1 then return nil end
  return '?'
end

local function fence_reader(root, argv)
  if argv[1] ~= 'fence' and argv[1] ~= 'fence checked' then return nil end
  local sent = int_arg(argv[2], 'epoch', 0, 9007199254740991)
  local checked = argv[1] == 'fence checked'
  local seen = {} -- lane -> {its slot word, its refusal or false, its held source or false}
  return function(g, slot_arg)
    local known = seen[g]
    if known and known[1] == slot_arg then return known[2] or nil, known[3] or nil end
    local slot, refused = int_or_refusal(slot_arg, 'slot', 0, 16383)
    if refused then return refused end
    local verdict, held = false, false
    if redis.call('GETBIT', root .. 'owns', slot) == 0
        or redis.call('HEXISTS', root .. 'moved', g) == 1 then
      local from = redis.call('HGET', root .. 'adopted', g)
      if not from then
        local to = redis.call('HGET', root .. 'moved', g) or handing(root, g, slot)
        if to then
          verdict = string.format('EMQMOVED %s epoch %s, sent at %.0f: lane ', to,
            redis.call('HGET', root .. 'meta', 'epoch') or '0', sent) .. g
        end
      elseif from ~= '' and not checked then
        held = from
      end
    end
    seen[g] = {slot_arg, verdict, held}
    return verdict or nil, held or nil
  end
end

-- The refusal of a call that carries no fence (a plain queue's) on a keyspace that is a shard
-- of a sharded queue (meta `shard` set, by ShardMap.fence_commands at the shard's making), read
-- by the caller from a meta read it makes anyway: "EMQSHARDED queue <q> is sharded over <S>
-- shards (this is its shard <k>): ..." (q: the first of the directory's `tags`, shard 0's,
-- which is the queue's name; S: its `count`; "?" off shard 0, where no directory is; read on
-- this path alone). Such a call would admit any lane onto this shard, or claim this shard
-- alone; the caller returns it before any write.
local function unfenced(root, shard)
  local directory = redis.call('HMGET', root .. 'shards', 'count', 'tags')
  local queue = string.match(directory[2] or '', '^%S+') or '?'
  return string.format('EMQSHARDED queue %s is sharded over %s shards (this is its shard %s): '
    .. 'open it with connect_queue(url, name) or ShardedQueue.connect(url, name, shards=S)',
    queue, directory[1] or '?', shard)
end
