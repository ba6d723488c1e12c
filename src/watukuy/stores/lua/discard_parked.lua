-- Delete parked rows of either kind.  KEYS: parked, retry, hold, poison index, invalid
-- index.  ARGV: id...
-- Returns how many were deleted.
local removed = 0
for j = 1, #ARGV do
  removed = removed + redis.call('HDEL', KEYS[1], ARGV[j])
  redis.call('HDEL', KEYS[2], ARGV[j])
  redis.call('HDEL', KEYS[3], ARGV[j])
  redis.call('ZREM', KEYS[4], ARGV[j])
  redis.call('ZREM', KEYS[5], ARGV[j])
end
return removed
