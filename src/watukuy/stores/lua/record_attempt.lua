-- Count a failed delivery.  KEYS: meta, rows, attempts, errors.
-- ARGV: owner, epoch, event_id, JSON of [last_error, next_attempt_at].
-- Returns 0 when the lease is lost, 1 otherwise (an unknown event id changes nothing).
if not fenced() then
  return 0
end
if redis.call('HEXISTS', KEYS[2], ARGV[3]) == 1 then
  redis.call('HINCRBY', KEYS[3], ARGV[3], 1)
  redis.call('HSET', KEYS[4], ARGV[3], ARGV[4])
end
return 1
