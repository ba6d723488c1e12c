-- Store HTTP validators of a URL hash.  KEYS: meta, validators.
-- ARGV: owner, epoch, url_hash, value.  Returns 0 when the lease is lost, 1 otherwise.
if not fenced() then
  return 0
end
redis.call('HSET', KEYS[2], ARGV[3], ARGV[4])
return 1
