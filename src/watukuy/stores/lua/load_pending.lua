-- Read pending rows in sequence order, in one consistent step.
-- KEYS: outbox, rows, attempts, errors.  ARGV: limit, lowest score ('-inf' or '(<seq>').
-- Returns a flat list: id, row, attempts or false, error or false, ...
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], ARGV[2], '+inf', 'LIMIT', 0, tonumber(ARGV[1]))
local out = {}
for j = 1, #ids do
  local id = ids[j]
  local row = redis.call('HGET', KEYS[2], id)
  if row then
    out[#out + 1] = id
    out[#out + 1] = row
    out[#out + 1] = redis.call('HGET', KEYS[3], id)
    out[#out + 1] = redis.call('HGET', KEYS[4], id)
  end
end
return out
