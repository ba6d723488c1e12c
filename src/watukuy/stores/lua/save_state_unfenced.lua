-- Administrative partial state update; never touches the lease.
-- KEYS: state[, due].  ARGV: partition, n, (field, value)... of the empty state (n pairs),
-- then the patch pairs.  Returns 1 when the key was created here, else 0.
local n = tonumber(ARGV[2])
local created = 0
if redis.call('EXISTS', KEYS[1]) == 0 then
  bulk('HSET', KEYS[1], slice(3, 2 * n))
  created = 1
end
local from = 3 + 2 * n
if #ARGV >= from then
  bulk('HSET', KEYS[1], slice(from, #ARGV - from + 1))
end
sync_due(KEYS[1], KEYS[2], ARGV[1])
return created
