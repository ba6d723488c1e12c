-- Give a lease up when it is still ours; the epoch stays, so it never goes down.
-- KEYS: meta.  ARGV: owner, epoch.
if fenced() then
  redis.call('HDEL', KEYS[1], 'lease_owner', 'lease_expires_at')
end
return 1
