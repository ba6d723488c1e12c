-- One page, all or nothing.
-- KEYS: meta, state, items, ids, outbox, rows, attempts, errors, parked, retry, hold,
--       log, logrows, logtime, tombs, tombtime, seen, poison index, invalid index, links
--       [, due].
-- ARGV: owner, epoch, now, partition, then the sections, each a count and its entries:
--       (field, value)                      state patch
--       (identity, row)                     item upserts
--       (identity)                          revived identities (their tombstones go)
--       the seen pass, then (identity)      seen marks of stored identities
--       (identity)                          item deletes (each row leaves a tombstone,
--                                           "deleted:<now>:<row>", aged by `now`)
--       (identity, link)                    listing links of stored identities, link =
--                                           JSON [read, prev, next]
--       (id, seq, row)                      outbox rows, row = "<seq>:<created_at>:<event>"
--       (id, attempts, error)               delivery data of the outbox rows that carry any
--       (seq, entry)                        log entries, entry = "<now>:<event>"
--       (id, row, hold, retry, kind, at)    parked rows (at: parked_at)
-- `error` is '' or the JSON of [last_error, next_attempt_at]; `hold` is '' or '+' and the
-- held key; `retry` is '' or the outbox form of the event.
-- Entries apply in order, so a repeated id ends with its last row, and deletes follow
-- upserts; links follow the deletes. Returns 0 when the lease is lost (nothing written), 1 when committed.
if not fenced() then
  return 0
end
local now = ARGV[3]
local i = 5

local n = tonumber(ARGV[i])
if n > 0 then
  patch_state(KEYS[2], slice(i + 1, 2 * n))
  sync_due(KEYS[2], KEYS[21], ARGV[4])
end
i = i + 1 + 2 * n

n = tonumber(ARGV[i])
if n > 0 then
  bulk('HSET', KEYS[3], slice(i + 1, 2 * n))
  local members = {}
  for j = 1, n do
    members[2 * j - 1] = 0
    members[2 * j] = ARGV[i + 2 * j - 1]
  end
  bulk('ZADD', KEYS[4], members)
end
i = i + 1 + 2 * n

n = tonumber(ARGV[i])
if n > 0 then
  local revived = slice(i + 1, n)
  bulk('HDEL', KEYS[15], revived)
  bulk('ZREM', KEYS[16], revived)
end
i = i + 1 + n

-- Upserts keep an existing mark (it lives in its own hash); a mark needs a stored row.
local mark = ARGV[i]
i = i + 1
n = tonumber(ARGV[i])
for j = 1, n do
  local identity = ARGV[i + j]
  if redis.call('HEXISTS', KEYS[3], identity) == 1 then
    redis.call('HSET', KEYS[17], identity, mark)
  end
end
i = i + 1 + n

n = tonumber(ARGV[i])
if n > 0 then
  local gone = slice(i + 1, n)
  for j = 1, n do
    local row = redis.call('HGET', KEYS[3], gone[j])
    if row then
      redis.call('HSET', KEYS[15], gone[j], 'deleted:' .. now .. ':' .. row)
      redis.call('ZADD', KEYS[16], now, gone[j])
    end
  end
  bulk('HDEL', KEYS[3], gone)
  bulk('ZREM', KEYS[4], gone)
  bulk('HDEL', KEYS[17], gone)
  bulk('HDEL', KEYS[20], gone)
end
i = i + 1 + n

-- Upserts keep an existing link (it lives in its own hash); a link needs a stored row.
n = tonumber(ARGV[i])
for j = 0, n - 1 do
  local identity = ARGV[i + 1 + 2 * j]
  if redis.call('HEXISTS', KEYS[3], identity) == 1 then
    redis.call('HSET', KEYS[20], identity, ARGV[i + 2 + 2 * j])
  end
end
i = i + 1 + 2 * n

n = tonumber(ARGV[i])
if n > 0 then
  local ids, rows, pending = {}, {}, {}
  for j = 0, n - 1 do
    local at = i + 1 + 3 * j
    ids[j + 1] = ARGV[at]
    rows[2 * j + 1] = ARGV[at]
    rows[2 * j + 2] = ARGV[at + 2]
    pending[2 * j + 1] = ARGV[at + 1]
    pending[2 * j + 2] = ARGV[at]
  end
  -- A re-emitted id replaces its old row: fresh attempts and no error unless given below.
  bulk('HDEL', KEYS[7], ids)
  bulk('HDEL', KEYS[8], ids)
  bulk('HSET', KEYS[6], rows)
  bulk('ZADD', KEYS[5], pending)
end
i = i + 1 + 3 * n

n = tonumber(ARGV[i])
for j = 0, n - 1 do
  local at = i + 1 + 3 * j
  if ARGV[at + 1] ~= '0' then
    redis.call('HSET', KEYS[7], ARGV[at], ARGV[at + 1])
  end
  if ARGV[at + 2] ~= '' then
    redis.call('HSET', KEYS[8], ARGV[at], ARGV[at + 2])
  end
end
i = i + 1 + 3 * n

n = tonumber(ARGV[i])
if n > 0 then
  local log, times = {}, {}
  for j = 0, n - 1 do
    local seq = ARGV[i + 1 + 2 * j]
    log[2 * j + 1] = seq
    log[2 * j + 2] = seq
    times[2 * j + 1] = now
    times[2 * j + 2] = seq
  end
  bulk('ZADD', KEYS[12], log)
  bulk('HSET', KEYS[13], slice(i + 1, 2 * n))
  bulk('ZADD', KEYS[14], times)
end
i = i + 1 + 2 * n

n = tonumber(ARGV[i])
for j = 0, n - 1 do
  local at = i + 1 + 6 * j
  local id, row, hold, retry = ARGV[at], ARGV[at + 1], ARGV[at + 2], ARGV[at + 3]
  redis.call('HSET', KEYS[9], id, row)
  index_parked(KEYS[18], KEYS[19], id, ARGV[at + 4], ARGV[at + 5])
  if retry ~= '' then
    redis.call('HSET', KEYS[10], id, retry)
  else
    redis.call('HDEL', KEYS[10], id)
  end
  if hold ~= '' then
    redis.call('HSET', KEYS[11], id, string.sub(hold, 2))
  else
    redis.call('HDEL', KEYS[11], id)
  end
end
-- 2 instead of 1: the key is paused (its wake time is void), for the cluster's due index.
if redis.call('HGET', KEYS[2], 'paused') == 'true' then
  return 2
end
return 1
