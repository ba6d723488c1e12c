-- Sliding-window log, step for step the arithmetic of watukuy.budget.window.take (doubles
-- on both sides, the same sums in the same order), driven by the caller's clock.
-- KEYS: the log, a sorted set: score = grant time, member = "<time>:<seq>:<cost>" where seq
--   (zero-padded) numbers the grants of one time in the order they were made, so members of
--   one score sort the way they were added.
-- ARGV: requests, per_ms, cost (text of a double, > 0 and <= requests), now (integer text),
--   and for a held grant (see watukuy.budget.window): stamp (integer text, >= now), the time
--   it is logged at until settled, and ticket, which then goes into its member as
--   "<time>:<seq>:<ticket>:<cost>" (budget_settle.lua finds it by it).
-- Returns 0 when the cost was granted, else the milliseconds until it fits (nothing taken).
local function integer(n)
  return string.format('%.17g', n)
end

local requests = tonumber(ARGV[1])
local per_ms = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
local now = tonumber(ARGV[4])

-- A grant made at t stops counting at t + per_ms exactly.
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', integer(now - per_ms))
local live = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
local n = #live / 2
local times, costs = {}, {}
for i = 1, n do
  costs[i] = tonumber(string.match(live[2 * i - 1], '[^:]*$'))
  times[i] = tonumber(live[2 * i])
end

-- Newest first, like the Python side, so a wait's partial sums are a later call's totals.
local total = 0
for i = n, 1, -1 do
  total = total + costs[i]
end
if total + cost <= requests then
  local at = ARGV[4]
  local ticket = ''
  if ARGV[5] and tonumber(ARGV[5]) > now then
    at = ARGV[5]
  end
  if ARGV[6] then
    ticket = ARGV[6] .. ':'
  end
  local seq = redis.call('ZCOUNT', KEYS[1], at, at)
  redis.call('ZADD', KEYS[1], at, at .. ':' .. string.format('%010d', seq) .. ':' .. ticket .. ARGV[3])
  -- Idle budgets vanish: the key lives until its newest grant leaves the window.
  local newest = tonumber(at)
  if n > 0 and times[n] > newest then
    newest = times[n]
  end
  redis.call('PEXPIRE', KEYS[1], integer(newest + per_ms - now))
  return 0
end

-- Walk back in time: the oldest grant time whose expiry leaves room for the cost.
local newer = 0
local fits_from = times[n]
for i = n, 1, -1 do
  if i == n or times[i + 1] ~= times[i] then
    if newer + cost > requests then
      break
    end
    fits_from = times[i]
  end
  newer = newer + costs[i]
end
return fits_from + per_ms - now
