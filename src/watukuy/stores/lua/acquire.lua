-- Take the lease when it is free or expired; create the key's state when missing.
-- KEYS: meta, state[, due].  ARGV: owner, now, expires_at, partition, (field, value)... of
-- the empty state.  Returns {new epoch, 1 when the key was created here else 0}, or nil
-- when another lease is still running.
local owner = redis.call('HGET', KEYS[1], 'lease_owner')
if owner then
  local expires = tonumber(redis.call('HGET', KEYS[1], 'lease_expires_at'))
  if expires and expires > tonumber(ARGV[2]) then
    return false
  end
end
local epoch = redis.call('HINCRBY', KEYS[1], 'lease_epoch', 1)
redis.call('HSET', KEYS[1], 'lease_owner', ARGV[1], 'lease_expires_at', ARGV[3])
local created = 0
if redis.call('EXISTS', KEYS[2]) == 0 then
  bulk('HSET', KEYS[2], slice(5, #ARGV - 4))
  sync_due(KEYS[2], KEYS[3], ARGV[4])
  created = 1
end
return {epoch, created}
