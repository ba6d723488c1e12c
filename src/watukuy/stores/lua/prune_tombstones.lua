-- Delete up to ARGV[2] tombstones removed before ARGV[1].
-- KEYS: tombs, tombtime.  Returns how many were deleted.
local ids = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', '(' .. ARGV[1], 'LIMIT', 0,
  tonumber(ARGV[2]))
if #ids > 0 then
  bulk('HDEL', KEYS[1], ids)
  bulk('ZREM', KEYS[2], ids)
end
return #ids
