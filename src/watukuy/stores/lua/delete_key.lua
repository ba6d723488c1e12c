-- Remove every Redis key of one (poller, partition); keep its last epoch as the floor.
-- KEYS: epoch, meta, then the key's other keys[, due, known] (`due` and `known` are the last
-- two when the store keeps them in the script: standalone Redis).
-- ARGV: number of per-key keys (meta included), partition, member (of the known-keys set).
-- UNLINK frees large hashes off the main thread.
local last = tonumber(redis.call('HGET', KEYS[2], 'lease_epoch'))
if last then
  local floor = tonumber(redis.call('GET', KEYS[1]))
  if not floor or last > floor then
    redis.call('SET', KEYS[1], last)
  end
end
local n = tonumber(ARGV[1])
redis.call('UNLINK', unpack(KEYS, 2, n + 1))
if KEYS[n + 2] then
  redis.call('ZREM', KEYS[n + 2], ARGV[2])
  redis.call('SREM', KEYS[n + 3], ARGV[3])
end
return 1
