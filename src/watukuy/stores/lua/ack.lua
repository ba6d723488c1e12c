-- Drop delivered outbox rows.  KEYS: meta, outbox, rows, attempts, errors.
-- ARGV: owner, epoch, event_id...   Returns 0 when the lease is lost, 1 otherwise.
if not fenced() then
  return 0
end
if #ARGV > 2 then
  local ids = slice(3, #ARGV - 2)
  bulk('ZREM', KEYS[2], ids)
  bulk('HDEL', KEYS[3], ids)
  bulk('HDEL', KEYS[4], ids)
  bulk('HDEL', KEYS[5], ids)
end
return 1
