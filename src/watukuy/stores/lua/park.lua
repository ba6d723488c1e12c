-- Move an outbox row to parked.  KEYS: meta, parked, retry, hold, outbox, rows, attempts,
-- errors, poison index, invalid index.  ARGV: owner, epoch, id, row, hold, retry, kind,
-- parked_at (as in commit.lua).
-- Returns 0 when the lease is lost, 1 otherwise.
if not fenced() then
  return 0
end
local id = ARGV[3]
redis.call('HSET', KEYS[2], id, ARGV[4])
index_parked(KEYS[9], KEYS[10], id, ARGV[7], ARGV[8])
if ARGV[6] ~= '' then
  redis.call('HSET', KEYS[3], id, ARGV[6])
else
  redis.call('HDEL', KEYS[3], id)
end
if ARGV[5] ~= '' then
  redis.call('HSET', KEYS[4], id, string.sub(ARGV[5], 2))
else
  redis.call('HDEL', KEYS[4], id)
end
redis.call('ZREM', KEYS[5], id)
redis.call('HDEL', KEYS[6], id)
redis.call('HDEL', KEYS[7], id)
redis.call('HDEL', KEYS[8], id)
return 1
