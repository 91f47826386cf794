-- Make an entry due at once (by the Redis clock) and wake the beats.
--
-- KEYS[1] = entries  HASH
-- KEYS[2] = schedule ZSET
-- ARGV[1] = name
-- ARGV[2] = pub/sub channel
-- Returns 1, or 0 when no entry of that name exists.
local bad = wrong_type({'hash', 'zset'})
if bad then
  return bad
end
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then
  return 0
end
local now = now_ms()
redis.call('ZADD', KEYS[2], now, ARGV[1])
redis.call('PUBLISH', ARGV[2], ARGV[1])
return 1
