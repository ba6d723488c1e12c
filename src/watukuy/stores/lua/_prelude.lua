-- Shared by every RedisStore script (the loader puts this file in front of each one).
--
-- Values are opaque strings: nothing here decodes JSON, so payloads, big integers and
-- unicode come back exactly as they were written. Outbox rows, retryable parked events and
-- log entries are stored as "<sequence>:<time>:<event JSON>".

-- True when the meta hash (KEYS[1]) holds the lease of ARGV[1] (owner) at ARGV[2] (epoch).
local function fenced()
  return redis.call('HGET', KEYS[1], 'lease_owner') == ARGV[1]
    and redis.call('HGET', KEYS[1], 'lease_epoch') == ARGV[2]
end

-- Run `command key ...` over a flat list of arguments, a bounded slice at a time: unpack()
-- has a stack limit, and pages can be large. Slices are even-sized, so pairs stay whole.
local function bulk(command, key, list)
  local size = #list
  for first = 1, size, 1000 do
    redis.call(command, key, unpack(list, first, math.min(first + 999, size)))
  end
end

-- Write the (field, value) pairs of a state patch into the state hash. A patch that sets
-- `wake_at` without saying `paused` on a paused key comes from a run that started before the
-- pause: its wake time is void, and the key stays out of the due index.
local function patch_state(state, pairs)
  local wake, paused = false, false
  for j = 1, #pairs, 2 do
    if pairs[j] == 'wake_at' then
      wake = true
    elseif pairs[j] == 'paused' then
      paused = true
    end
  end
  bulk('HSET', state, pairs)
  if wake and not paused and redis.call('HGET', state, 'paused') == 'true' then
    redis.call('HSET', state, 'wake_at', 'null')
  end
end

-- Copy `count` consecutive ARGV entries starting at `from` into a new list.
local function slice(from, count)
  local out = {}
  for j = 0, count - 1 do
    out[j + 1] = ARGV[from + j]
  end
  return out
end

-- Bring the poller's due index (sorted set `due`: partition by wake_at) in step with the
-- `wake_at` field of the state hash `state`, after the script has written that hash. `due`
-- is nil when the store keeps the index itself, outside the script (Redis Cluster).
local function sync_due(state, due, member)
  if not due then
    return
  end
  local at = redis.call('HGET', state, 'wake_at')
  if at and at ~= 'null' then
    redis.call('ZADD', due, at, member)
  else
    redis.call('ZREM', due, member)
  end
end

-- Keep the parked-row indexes in step with a parked row written as `kind`: `poison` and
-- `invalid` are sorted sets of ids scored by parked_at (list_parked reads `limit` of them).
local function index_parked(poison, invalid, id, kind, parked_at)
  if kind == 'poison' then
    redis.call('ZREM', invalid, id)
    redis.call('ZADD', poison, parked_at, id)
  else
    redis.call('ZREM', poison, id)
    redis.call('ZADD', invalid, parked_at, id)
  end
end
