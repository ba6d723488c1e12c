-- Put parked poison events back in the outbox at their original sequence, fresh.
-- KEYS: parked, retry, hold, outbox, rows, attempts, errors, poison index, invalid index.
-- ARGV: id...
-- Only ids with a retry form move (invalid items have none). Returns how many moved.
local moved = 0
for j = 1, #ARGV do
  local id = ARGV[j]
  local row = redis.call('HGET', KEYS[2], id)
  if row then
    local seq = string.match(row, '^(%-?%d+):')
    redis.call('HSET', KEYS[5], id, row)
    redis.call('ZADD', KEYS[4], seq, id)
    redis.call('HDEL', KEYS[6], id)
    redis.call('HDEL', KEYS[7], id)
    redis.call('HDEL', KEYS[1], id)
    redis.call('HDEL', KEYS[2], id)
    redis.call('HDEL', KEYS[3], id)
    redis.call('ZREM', KEYS[8], id)
    redis.call('ZREM', KEYS[9], id)
    moved = moved + 1
  end
end
return moved
