-- The seen marks and listing links of the identities in ARGV, in one consistent step.
-- KEYS: items, seen, links.
-- Returns one string, a line per identity in ARGV order: empty when no row is stored for
-- it, else its mark ('0' when it has none), then a space and its link when it has one.
-- A link is compact JSON, which holds no raw newline. One string instead of a list of
-- values: the client parses one reply element instead of two per identity.
local out = {}
for j = 1, #ARGV do
  local identity = ARGV[j]
  if redis.call('HEXISTS', KEYS[1], identity) == 1 then
    local line = redis.call('HGET', KEYS[2], identity) or '0'
    local link = redis.call('HGET', KEYS[3], identity)
    if link then
      line = line .. ' ' .. link
    end
    out[j] = line
  else
    out[j] = ''
  end
end
return table.concat(out, '\n')
