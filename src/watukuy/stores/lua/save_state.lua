-- Fenced partial state update.  KEYS: meta, state.  ARGV: owner, epoch, (field, value)...
-- Returns 0 when the lease is lost, 1 when saved.
if not fenced() then
  return 0
end
if #ARGV > 2 then
  bulk('HSET', KEYS[2], slice(3, #ARGV - 2))
end
return 1
