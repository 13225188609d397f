-- policy.lua: apply a queue's lane policies in one step: the default for every lane not named
-- and the named lanes' own settings. Idempotent: applying the policies in force writes nothing,
-- so every process may apply them at start (no fresh budget, no window restarted).
-- KEYS[1] root     `emq:{q}:`
-- ARGV[1..4]       the default: ceiling, weight, rate, backlog cap ("" = none), as
--                  lane_limit.lua takes them
-- ARGV[5..]        per named lane, 6 values: group, ceiling, weight, rate, cap ("" = follow the
--                  default), and the policy as text (JSON, kept in `policies` for the read plane)
-- A lane named before and not now loses its own settings: it follows the default again.
-- Returns the number of settings changed.
-- Errors  EMQARG a value out of bounds (every value is checked before any write).
local root = KEYS[1]
local policies = root .. 'policies'
local fields = {'limit', 'weight', 'rate', 'cap'}
local width = #fields + 2
for i, kind in ipairs(fields) do setting_arg('d' .. kind, ARGV[i]) end
local named = {}
for i = #fields + 1, #ARGV, width do
  for j, kind in ipairs(fields) do setting_arg('g' .. kind, ARGV[i + j]) end
  named[ARGV[i]] = true
end
local now, changed = now_ms(), 0
for i, kind in ipairs(fields) do
  changed = changed + set_default(root, 'd' .. kind, ARGV[i], now)
end
for _, g in ipairs(redis.call('HKEYS', policies)) do
  if not named[g] then
    for _, kind in ipairs(fields) do changed = changed + set_lane(root, g, 'g' .. kind, '', now) end
    redis.call('HDEL', policies, g)
  end
end
for i = #fields + 1, #ARGV, width do
  local g = ARGV[i]
  for j, kind in ipairs(fields) do
    changed = changed + set_lane(root, g, 'g' .. kind, ARGV[i + j], now)
  end
  if redis.call('HGET', policies, g) ~= ARGV[i + width - 1] then
    redis.call('HSET', policies, g, ARGV[i + width - 1])
  end
end
if changed > 0 then wake(root) end
return changed
