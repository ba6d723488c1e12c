-- Logged events after a sequence, within a time window, in sequence order; the work of one
-- call is bounded whatever the size of the log.
-- KEYS: log, logrows, logtime.
-- ARGV: after ('' or a sequence), from_time, to_time ('' for no bound), limit,
--       window_max, scan_max.
-- Returns {continue_after, seq, "<created_at>:<event>", seq, row, ...}: continue_after is ''
-- when the answer is complete, else the last sequence examined (call again after it for
-- the rest of the page).
--
-- Without a time bound: a keyset range on the sequence index, `limit` entries.
-- With one: when the window holds at most `window_max` entries, they are read from the time
-- index (one range lookup, cost in proportion to the window, not the log) and the lowest
-- `limit` sequences after `after` are kept. A larger window is walked in sequence order
-- from `after`, at most `scan_max` entries per call.
local after, limit = ARGV[1], tonumber(ARGV[4])
local low = '-inf'
if after ~= '' then
  low = '(' .. after
end
local out = {''}

local function emit(seqs)
  if #seqs == 0 then
    return
  end
  local rows = redis.call('HMGET', KEYS[2], unpack(seqs))
  for j = 1, #seqs do
    if rows[j] then
      out[#out + 1] = seqs[j]
      out[#out + 1] = rows[j]
    end
  end
end

if ARGV[2] == '' and ARGV[3] == '' then
  emit(redis.call('ZRANGEBYSCORE', KEYS[1], low, '+inf', 'LIMIT', 0, limit))
  return out
end

local from_s, to_s = '-inf', '+inf'
if ARGV[2] ~= '' then
  from_s = ARGV[2]
end
if ARGV[3] ~= '' then
  to_s = ARGV[3]
end

if redis.call('ZCOUNT', KEYS[3], from_s, to_s) <= tonumber(ARGV[5]) then
  local members = redis.call('ZRANGEBYSCORE', KEYS[3], from_s, to_s)
  local floor = nil
  if after ~= '' then
    floor = tonumber(after)
  end
  local picked = {}
  for j = 1, #members do
    local n = tonumber(members[j])
    if not floor or n > floor then
      picked[#picked + 1] = {n, members[j]}
    end
  end
  table.sort(picked, function(a, b) return a[1] < b[1] end)
  local seqs = {}
  for j = 1, math.min(limit, #picked) do
    seqs[j] = picked[j][2]
  end
  emit(seqs)
  return out
end

local from_time, to_time = tonumber(ARGV[2]), tonumber(ARGV[3])
local budget, found = tonumber(ARGV[6]), 0
while budget > 0 do
  local take = math.min(500, budget)
  local seqs = redis.call('ZRANGEBYSCORE', KEYS[1], low, '+inf', 'LIMIT', 0, take)
  if #seqs == 0 then
    return out
  end
  budget = budget - #seqs
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
          return out
        end
      end
    end
  end
  if #seqs < take then
    return out
  end
  low = '(' .. seqs[#seqs]
end
out[1] = string.sub(low, 2)
return out
