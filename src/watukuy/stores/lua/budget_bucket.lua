-- Token bucket (GCRA), step for step the arithmetic of watukuy.budget.bucket.take_bucket
-- (doubles on both sides), driven by the caller's clock.
-- KEYS: the bucket, a string holding the theoretical arrival time (a double, epoch ms).
-- ARGV: requests, per_ms, burst, cost (text of a double, > 0 and <= burst), now (integer).
-- Returns 0 when the cost was granted, else the milliseconds until it fits (nothing taken).
local requests = tonumber(ARGV[1])
local per_ms = tonumber(ARGV[2])
local burst = tonumber(ARGV[3])
local cost = tonumber(ARGV[4])
local now = tonumber(ARGV[5])

local interval = per_ms / requests
local tat = tonumber(redis.call('GET', KEYS[1]))
local start = now
if tat ~= nil and tat >= now then
  start = tat
end
local after = start + cost * interval
local limit = burst * interval
if after - now <= limit then
  -- %.17g keeps every bit of the double; the key vanishes once the bucket is full again.
  redis.call('SET', KEYS[1], string.format('%.17g', after), 'PX', math.max(1, math.ceil(after - now)))
  return 0
end
return math.max(1, math.ceil(after - limit - now))
