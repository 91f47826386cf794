-- Remove an entry and everything stored about it.
--
-- KEYS[1] = entries  HASH       KEYS[4] = inflight    HASH
-- KEYS[2] = schedule ZSET       KEYS[5] = quarantine  HASH
-- KEYS[3] = state    HASH       KEYS[6] = its source's SET of names
-- KEYS[7] = the shard's layout HASH
-- KEYS[8] = its history LIST        KEYS[9] = the runs going on HASH (the worker hook's)
-- ARGV[1] = name
-- ARGV[2] = pub/sub channel to wake the beats on
-- ARGV[3] = "1": remove only when KEYS[6] holds the name (the caller's source owns it)
-- ARGV[4] = the layout the caller followed ('4', or '4>8' during a reshard)
-- Returns 1 when something was removed, 0 when nothing was (or another source owns it),
--         -2 when the layout changed (read it again).
local refusal = refused(7, ARGV[4], {'hash', 'zset', 'hash', 'hash', 'hash', 'set'})
if refusal then
  return refusal
end
if ARGV[3] == '1' and redis.call('SISMEMBER', KEYS[6], ARGV[1]) == 0 then
  return 0
end
local removed = redis.call('HDEL', KEYS[1], ARGV[1]) + redis.call('HDEL', KEYS[5], ARGV[1])
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('HDEL', KEYS[3], ARGV[1])
redis.call('HDEL', KEYS[4], ARGV[1])
redis.call('SREM', KEYS[6], ARGV[1])
-- What the beats and workers recorded of its runs goes too (an emptied list is deleted;
-- a key of another type stays).
redis.pcall('LTRIM', KEYS[8], 1, 0)
redis.pcall('HDEL', KEYS[9], ARGV[1])
if removed > 0 then
  redis.call('PUBLISH', ARGV[2], ARGV[1])
  return 1
end
return 0
