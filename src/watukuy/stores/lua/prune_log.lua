-- Delete up to ARGV[2] log entries created before ARGV[1].
-- KEYS: log, logrows, logtime.  Returns how many were deleted.
local seqs = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', '(' .. ARGV[1], 'LIMIT', 0,
  tonumber(ARGV[2]))
if #seqs > 0 then
  bulk('ZREM', KEYS[1], seqs)
  bulk('HDEL', KEYS[2], seqs)
  bulk('ZREM', KEYS[3], seqs)
end
return #seqs
