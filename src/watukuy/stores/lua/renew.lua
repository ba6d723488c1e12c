-- Extend a lease that is still ours.  KEYS: meta.  ARGV: owner, epoch, expires_at.
if not fenced() then
  return 0
end
redis.call('HSET', KEYS[1], 'lease_expires_at', ARGV[3])
return 1
