-- Set aside a stored definition that cannot be loaded, unless it changed meanwhile.
--
-- KEYS[1] = entries  HASH    KEYS[3] = inflight    HASH
-- KEYS[2] = schedule ZSET    KEYS[4] = quarantine  HASH  name -> {"definition", "error", "at", "by"}
-- ARGV[1] = name
-- ARGV[2] = the definition found to be corrupt
-- ARGV[3] = the error
-- ARGV[4] = who found it (a beat id or 'api')
-- Returns 1 when set aside, 0 when the definition had changed (nothing done).
local bad = wrong_type({'hash', 'zset', 'hash', 'hash'})
if bad then
  return bad
end
if redis.call('HGET', KEYS[1], ARGV[1]) ~= ARGV[2] then
  return 0
end
local now = now_ms()
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('HDEL', KEYS[3], ARGV[1])
redis.call('HSET', KEYS[4], ARGV[1], cjson.encode(
  {definition = ARGV[2], error = ARGV[3], at = now, by = ARGV[4]}))
return 1
