-- Up to `limit` parked rows of each wanted kind, oldest first, read through the parked-row
-- indexes (never the whole hash).  KEYS: parked, poison index, invalid index.
-- ARGV: kind ('' for both), limit (0 for no limit).
-- Returns the rows (JSON as written), the wanted kinds one after the other; an index entry
-- without its row is dropped.
local indexes = {}
if ARGV[1] ~= 'invalid' then
  indexes[#indexes + 1] = KEYS[2]
end
if ARGV[1] ~= 'poison' then
  indexes[#indexes + 1] = KEYS[3]
end
local stop = tonumber(ARGV[2]) - 1
local out = {}
for _, index in ipairs(indexes) do
  local ids = redis.call('ZRANGE', index, 0, stop)
  for first = 1, #ids, 1000 do
    local last = math.min(first + 999, #ids)
    local rows = redis.call('HMGET', KEYS[1], unpack(ids, first, last))
    for j = 1, #rows do
      if rows[j] then
        out[#out + 1] = rows[j]
      else
        redis.call('ZREM', index, ids[first + j - 1])
      end
    end
  end
end
return out
