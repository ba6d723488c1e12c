-- Fenced partial state update.  KEYS: meta, state[, due].
-- ARGV: owner, epoch, partition, (field, value)...
-- Returns 0 when the lease is lost, 1 when saved.
if not fenced() then
  return 0
end
if #ARGV > 3 then
  patch_state(KEYS[2], slice(4, #ARGV - 3))
  sync_due(KEYS[2], KEYS[3], ARGV[3])
end
-- 2 instead of 1: the key is paused (its wake time is void), for the cluster's due index.
if redis.call('HGET', KEYS[2], 'paused') == 'true' then
  return 2
end
return 1
