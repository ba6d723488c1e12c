-- The seen marks and listing links of the identities in ARGV, in one consistent step.
-- KEYS: items, seen, links.
-- Returns a flat list, two entries per identity in ARGV order: its mark ('0' when it has
-- none) and its link or false, or false and false when no row is stored for it.
local out = {}
for j = 1, #ARGV do
  local identity = ARGV[j]
  if redis.call('HEXISTS', KEYS[1], identity) == 1 then
    out[2 * j - 1] = redis.call('HGET', KEYS[2], identity) or '0'
    out[2 * j] = redis.call('HGET', KEYS[3], identity)
  else
    out[2 * j - 1] = false
    out[2 * j] = false
  end
end
return out
