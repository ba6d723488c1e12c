-- Take the lease when it is free or expired; create the key's state when missing.
-- KEYS: meta, state, epoch[, due, known].  ARGV: owner, now, expires_at, partition, member
-- (of the known-keys set), (field, value)... of the empty state.  Returns {new epoch, 1 when
-- the key was created here else 0}, or nil when another lease is still running.
-- `epoch` is the key's epoch floor, written by delete_key and never deleted: a key created
-- again continues after it. `due` and `known` are nil when the store keeps them outside the
-- script (Redis Cluster).
local owner = redis.call('HGET', KEYS[1], 'lease_owner')
if owner then
  local expires = tonumber(redis.call('HGET', KEYS[1], 'lease_expires_at'))
  if expires and expires > tonumber(ARGV[2]) then
    return false
  end
end
local epoch = redis.call('HINCRBY', KEYS[1], 'lease_epoch', 1)
local floor = tonumber(redis.call('GET', KEYS[3]))
if floor and epoch <= floor then
  epoch = floor + 1
  redis.call('HSET', KEYS[1], 'lease_epoch', epoch)
end
redis.call('HSET', KEYS[1], 'lease_owner', ARGV[1], 'lease_expires_at', ARGV[3])
local created = 0
if redis.call('EXISTS', KEYS[2]) == 0 then
  bulk('HSET', KEYS[2], slice(6, #ARGV - 5))
  sync_due(KEYS[2], KEYS[4], ARGV[4])
  created = 1
end
if KEYS[5] then
  redis.call('SADD', KEYS[5], ARGV[5])
end
return {epoch, created}
