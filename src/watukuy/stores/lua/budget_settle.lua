-- Settle a held grant of the sliding-window log (watukuy.budget.window.settle): its answer
-- arrived at `at`, so from now on it counts as a grant made at `at`.
-- KEYS: the log (see budget_take.lua).
-- ARGV: ticket, stamp (the score it was held at, integer text), at (integer text), per_ms,
--   now (integer text).
-- Returns 1 when the grant was moved, 0 when it was no longer in the log.
local function integer(n)
  return string.format('%.17g', n)
end

local ticket, stamp, at = ARGV[1], ARGV[2], ARGV[3]
local per_ms, now = tonumber(ARGV[4]), tonumber(ARGV[5])
local needle = ':' .. ticket .. ':'
for _, member in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], stamp, stamp)) do
  if string.find(member, needle, 1, true) then
    local cost = string.match(member, '[^:]*$')
    redis.call('ZREM', KEYS[1], member)
    local seq = redis.call('ZCOUNT', KEYS[1], at, at)
    redis.call('ZADD', KEYS[1], at, at .. ':' .. string.format('%010d', seq) .. ':' .. cost)
    local newest = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
    local ttl = tonumber(newest[2]) + per_ms - now
    if ttl > 0 then
      redis.call('PEXPIRE', KEYS[1], integer(ttl))
    end
    return 1
  end
end
return 0
