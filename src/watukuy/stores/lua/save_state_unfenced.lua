-- Administrative partial state update; never touches the lease.
-- KEYS: state.  ARGV: n, (field, value)... of the empty state (n pairs), then the patch pairs.
local n = tonumber(ARGV[1])
if redis.call('EXISTS', KEYS[1]) == 0 then
  bulk('HSET', KEYS[1], slice(2, 2 * n))
end
local from = 2 + 2 * n
if #ARGV >= from then
  bulk('HSET', KEYS[1], slice(from, #ARGV - from + 1))
end
return 1
