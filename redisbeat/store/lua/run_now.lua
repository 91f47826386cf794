-- Make an entry due at once (by the Redis clock) and wake the beats.
--
-- KEYS[1] = entries  HASH
-- KEYS[2] = schedule ZSET
-- KEYS[3] = the shard's layout HASH
-- KEYS[4] = state    HASH  only read: a paused entry is not run (its finish would resume it)
-- ARGV[1] = name
-- ARGV[2] = pub/sub channel
-- ARGV[3] = the layout the caller followed ('4', or '4>8' during a reshard)
-- Returns 1, 0 when no entry of that name exists, -2 when the layout changed (read it again),
-- -3 when it is paused.
local refusal = refused(3, ARGV[3], {'hash', 'zset'})
if refusal then
  return refusal
end
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then
  return 0
end
local now = now_ms()
if pause_token(redis.call('HGET', KEYS[4], ARGV[1]), now) ~= '' then
  return -3
end
redis.call('ZADD', KEYS[2], now, ARGV[1])
redis.call('PUBLISH', ARGV[2], ARGV[1])
return 1
