-- Forget the entries of the store API (source 'api') that left the schedule for good (a
-- one-off, a Clocked entry or one past its end, once sent) longer than the retention ago.
-- Entries of other sources are left to them (a beat_schedule or a Django table declares its
-- entries, and would write a removed one again); an entry scheduled again since (edited,
-- run now) is kept. Either way the name leaves the index.
--
-- KEYS[1] = spent    ZSET  name -> when it left the schedule (ms)
-- KEYS[2] = schedule ZSET   KEYS[4] = state    HASH
-- KEYS[3] = entries  HASH   KEYS[5] = inflight HASH
-- KEYS[6] = the api source's SET of names
-- ARGV[1] = the retention, ms
-- ARGV[2] = how many names at most
-- Returns how many entries were forgotten.
local names = redis.pcall('ZRANGEBYSCORE', KEYS[1], '-inf', now_ms() - tonumber(ARGV[1]),
                          'LIMIT', 0, tonumber(ARGV[2]))
local bad = key_error(names, 1, 'zset')
if bad then
  return bad
end
if #names == 0 then
  return 0
end
bad = wrong_type({'zset', 'zset', 'hash', 'hash', 'hash', 'set'})
if bad then
  return bad
end
local forgotten = 0
for _, name in ipairs(names) do
  if not redis.call('ZSCORE', KEYS[2], name) and redis.call('HEXISTS', KEYS[5], name) == 0
      and redis.call('SISMEMBER', KEYS[6], name) == 1 then
    redis.call('HDEL', KEYS[3], name)
    redis.call('HDEL', KEYS[4], name)
    redis.call('SREM', KEYS[6], name)
    forgotten = forgotten + 1
  end
end
write_many('ZREM', 1, names)
return forgotten
