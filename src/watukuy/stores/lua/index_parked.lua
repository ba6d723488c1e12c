-- Build the parked-row indexes for rows written before they existed, one bounded SCAN step
-- per call.  KEYS: parked, poison index, invalid index.
-- ARGV: cursor, count, what ('rows': index the rows of one HSCAN step of the hash; '2' or
-- '3': drop the entries of one ZSCAN step of that index that have no row).
-- Returns the next cursor ('0' when the walk is over). Every step is idempotent, and a
-- concurrent park, retry or discard keeps hash and indexes in step itself.
-- A row is decoded only to read its kind (2nd element) and parked_at (7th).
if ARGV[3] == 'rows' then
  local reply = redis.call('HSCAN', KEYS[1], ARGV[1], 'COUNT', ARGV[2])
  local fields = reply[2]
  for j = 1, #fields, 2 do
    local row = cjson.decode(fields[j + 1])
    index_parked(KEYS[2], KEYS[3], fields[j], row[2], string.format('%d', row[7]))
  end
  return reply[1]
end
local index = KEYS[tonumber(ARGV[3])]
local reply = redis.call('ZSCAN', index, ARGV[1], 'COUNT', ARGV[2])
local entries = reply[2]
for j = 1, #entries, 2 do
  if redis.call('HEXISTS', KEYS[1], entries[j]) == 0 then
    redis.call('ZREM', index, entries[j])
  end
end
return reply[1]
