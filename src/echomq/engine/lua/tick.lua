-- tick.lua: the beat's upkeep in one call: promote due jobs and benched lanes, then reap
-- expired leases. What a consumer (or the metronome) runs once per beat.
-- KEYS[1] root          `emq:{q}:`
-- ARGV[1] limit         most scheduled jobs to move; > 0
-- ARGV[2] reap_limit    most expired leases to handle; > 0
-- ARGV[3] max_stalled   stalls after which a job is dead with last_error "stalled"; > 0
-- Returns {jobs moved, lanes returned, recovered ids, dead ids, next_due, outbox}: next_due is
-- the ms until the next scheduled job, lease deadline or benched lane falls due (-1: none), so
-- an idle caller knows when its next upkeep is worth a round trip; outbox is the number of
-- flow entries waiting for the relay to deliver them to parents on other queues.
local root = KEYS[1]
local limit = int_arg(ARGV[1], 'limit', 1, 10000)
local reap_limit = int_arg(ARGV[2], 'reap_limit', 1, 10000)
local max_stalled = int_arg(ARGV[3], 'max_stalled', 1, 1000)
local now = now_ms()
local promoted = promote_due(root, limit, now)
local reaped = reap_expired(root, reap_limit, max_stalled, now)
local due = -1
for _, suffix in ipairs({'schedule', 'active', 'rdue'}) do
  local head = redis.call('ZRANGE', root .. suffix, 0, 0, 'WITHSCORES')
  if head[2] then
    local wait = math.max(0, tonumber(head[2]) - now)
    if due < 0 or wait < due then due = wait end
  end
end
local outbox = redis.call('LLEN', root .. 'flow:outbox')
return {promoted[1], promoted[2], reaped[1], reaped[2], due, outbox}
