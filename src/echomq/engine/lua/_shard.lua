-- _shard.lua: the fence of a shard of a sharded queue (docs/concepts/shards.md, "The fence").
-- An admission sent to a shard (enqueue.lua, flow.lua, reassign.lua) opens its ARGV with the
-- word "fence" and the producer's placement epoch, and carries after each item the lane slot of
-- its lane (crc16 of the lane mod 16384, computed by the producer); an unsharded queue's call
-- carries none of it and pays nothing. The shard serves a lane when `adopted` holds it, or when
-- `owns` has its slot's bit set and `moved` does not hold it; an item of a lane it does not
-- serve is refused, and nothing of it written. Libraries load in name order: this one builds
-- on _lib.lua.

-- The fence of one call: nil when ARGV does not open with "fence" (an unsharded queue); else
-- a function (lane, slot word) answering nil when this shard serves the lane, or the item's
-- refusal: EMQARG for a slot out of 0..16383, else "EMQMOVED <to> epoch <e>, sent at <p>:
-- lane <lane>" (to: the shard `moved` names, "?" when none does; e: this shard's placement
-- epoch, meta `epoch`; p: the producer's). A lane's fence is read once per call: two reads
-- (GETBIT owns, HEXISTS moved) for a lane the shard owns. The epoch is checked before any
-- write (EMQARG epoch fails the call).
local function fence_reader(root, argv)
  if argv[1] ~= 'fence' then return nil end
  local sent = int_arg(argv[2], 'epoch', 0, 9007199254740991)
  local seen = {} -- lane -> {its slot word, its refusal or false}
  return function(g, slot_arg)
    local known = seen[g]
    if known and known[1] == slot_arg then return known[2] or nil end
    local slot, refused = int_or_refusal(slot_arg, 'slot', 0, 16383)
    if refused then return refused end
    local verdict = false
    if redis.call('GETBIT', root .. 'owns', slot) == 0
        or redis.call('HEXISTS', root .. 'moved', g) == 1 then
      if redis.call('HEXISTS', root .. 'adopted', g) == 0 then
        verdict = string.format('EMQMOVED %s epoch %s, sent at %.0f: lane ',
          redis.call('HGET', root .. 'moved', g) or '?',
          redis.call('HGET', root .. 'meta', 'epoch') or '0', sent) .. g
      end
    end
    seen[g] = {slot_arg, verdict}
    return verdict or nil
  end
end
