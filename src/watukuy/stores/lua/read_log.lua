-- Logged events after a sequence, within a time window, in sequence order.
-- KEYS: log, logrows.  ARGV: after ('-inf' or '(<seq>'), from_time, to_time, limit; an
-- empty time means no bound.  Returns a flat list: seq, "<created_at>:<event>", ...
local from_time, to_time, limit = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local out, found, offset = {}, 0, 0
while found < limit do
  local seqs = redis.call('ZRANGEBYSCORE', KEYS[1], ARGV[1], '+inf', 'LIMIT', offset, 500)
  if #seqs == 0 then
    break
  end
  offset = offset + #seqs
  local rows = redis.call('HMGET', KEYS[2], unpack(seqs))
  for j = 1, #seqs do
    local row = rows[j]
    if row then
      local created = tonumber(string.match(row, '^(%-?%d+):'))
      if (not from_time or created >= from_time) and (not to_time or created <= to_time) then
        out[#out + 1] = seqs[j]
        out[#out + 1] = row
        found = found + 1
        if found == limit then
          break
        end
      end
    end
  end
end
return out
