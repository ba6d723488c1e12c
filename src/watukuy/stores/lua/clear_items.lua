-- Move the snapshot rows of the identities in ARGV to tombstones ("cleared:<seen_at>:<row>",
-- aged by the row's seen_at, the fifth element of its JSON array).
-- KEYS: items, ids, tombs, tombtime, seen, links.  Returns how many rows moved.
local moved = 0
for j = 1, #ARGV do
  local identity = ARGV[j]
  local row = redis.call('HGET', KEYS[1], identity)
  if row then
    -- Only the number is read out of the row; the row itself is kept as it was written.
    local seen_at = string.format('%d', cjson.decode(row)[5])
    redis.call('HSET', KEYS[3], identity, 'cleared:' .. seen_at .. ':' .. row)
    redis.call('ZADD', KEYS[4], seen_at, identity)
    redis.call('HDEL', KEYS[1], identity)
    moved = moved + 1
  end
  redis.call('ZREM', KEYS[2], identity)
  redis.call('HDEL', KEYS[5], identity)
  redis.call('HDEL', KEYS[6], identity)
end
return moved
