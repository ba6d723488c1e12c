-- Fenced partial state update.  KEYS: meta, state[, due].
-- ARGV: owner, epoch, partition, (field, value)...
-- Returns 0 when the lease is lost, 1 when saved.
if not fenced() then
  return 0
end
if #ARGV > 3 then
  bulk('HSET', KEYS[2], slice(4, #ARGV - 3))
  sync_due(KEYS[2], KEYS[3], ARGV[3])
end
return 1
