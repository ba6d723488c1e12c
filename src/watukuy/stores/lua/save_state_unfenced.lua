-- Administrative partial state update; never touches the lease.
-- KEYS: state[, due, known].  ARGV: partition, member (of the known-keys set), n,
-- (field, value)... of the empty state (n pairs), then the patch pairs.  Returns 1 when the
-- key was created here, else 0.
local n = tonumber(ARGV[3])
local created = 0
if redis.call('EXISTS', KEYS[1]) == 0 then
  bulk('HSET', KEYS[1], slice(4, 2 * n))
  created = 1
end
local from = 4 + 2 * n
if #ARGV >= from then
  bulk('HSET', KEYS[1], slice(from, #ARGV - from + 1))
end
sync_due(KEYS[1], KEYS[2], ARGV[1])
if KEYS[3] then
  redis.call('SADD', KEYS[3], ARGV[2])
end
-- Plus 2 when the key is paused (its wake time is void), for the cluster's due index.
if redis.call('HGET', KEYS[1], 'paused') == 'true' then
  return created + 2
end
return created
