-- Token bucket, step for step the arithmetic of watukuy.budget.bucket.take (doubles on
-- both sides, the same operations in the same order), driven by the caller's clock.
-- KEYS: bucket hash {tokens, updated_at}.  ARGV: requests, per_ms, cost, now.
-- Returns 0 when the tokens were taken, else the milliseconds to wait (nothing taken).
local requests = tonumber(ARGV[1])
local per_ms = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
local now = tonumber(ARGV[4])
local stored = redis.call('HMGET', KEYS[1], 'tokens', 'updated_at')
local tokens, updated_at = requests, now
if stored[1] and stored[2] then
  tokens, updated_at = tonumber(stored[1]), tonumber(stored[2])
end
local elapsed = now - updated_at
local refill = 0
if elapsed > 0 then
  refill = elapsed * requests / per_ms
end
tokens = math.min(requests, tokens + refill)
updated_at = math.max(updated_at, now)
local wait = 0
if tokens >= cost then
  tokens = tokens - cost
else
  wait = math.ceil((cost - tokens) * per_ms / requests)
end
redis.call('HSET', KEYS[1], 'tokens', string.format('%.17g', tokens),
  'updated_at', string.format('%.17g', updated_at))
return wait
