-- placement_lease.lua: the lease that keeps a sharded queue's lane moves and grows apart (one
-- at a time: two movers of one lane, two grows, or a grow and a move would interleave their
-- steps; docs/concepts/shards.md, "Changing S"). A holder extends it while it works and
-- releases it at the end; one that died leaves it to expire, and the next resumes its work.
-- KEYS[1] root    `emq:{q}:` (shard 0: the directory's slot)
-- ARGV[1] op      "hold" (take it free, or extend it held by this token) or "release"
-- ARGV[2] token   the holder's token (random, chosen by the holder)
-- ARGV[3] holder  who holds it, as a refusal names it (hold)
-- ARGV[4] ttl     ms it lasts from now, 1..3600000 (hold)
-- Returns hold: {1} held; {0, holder, pttl} another token holds it (its holder, ms left).
--         release: 1 released, 0 not held by this token (expired, or taken over).
-- Errors  EMQARG an unknown op or a ttl out of bounds.
local lease, op, token = KEYS[1] .. 'placing', ARGV[1], ARGV[2]
local held = redis.call('GET', lease)
local mine = held and string.sub(held, 1, #token + 1) == token .. ' '
if op == 'release' then
  if mine then return redis.call('DEL', lease) end
  return 0
end
if op ~= 'hold' then
  error({err = 'EMQARG op ' .. tostring(op) .. ': must be hold or release'})
end
local ttl = int_arg(ARGV[4], 'ttl', 1, 3600000)
if held and not mine then
  return {0, string.sub(held, (string.find(held, ' ', 1, true) or #held) + 1),
    redis.call('PTTL', lease)}
end
redis.call('SET', lease, token .. ' ' .. ARGV[3], 'PX', ttl)
return {1}
