-- Record how many shards the deployment's entries are split into, or say how many it was.
-- The first process to touch a deployment records its count; one with another count must
-- not read or write entries where they are not.
--
-- KEYS[1] = layout    HASH  shards -> the count
-- KEYS[2] = schedule  ZSET  shard 0's, only read: entries written before counts were recorded
-- ARGV[1] = this process's count
-- Returns the count the deployment's entries are split into.
local recorded = redis.call('HGET', KEYS[1], 'shards')
if recorded then
  return tonumber(recorded)
end
if ARGV[1] ~= '1' and #redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', '+inf', 'LIMIT', 0, 1) > 0 then
  -- Entries from before shards existed: all of them in shard 0.
  redis.call('HSET', KEYS[1], 'shards', '1')
  return 1
end
redis.call('HSET', KEYS[1], 'shards', ARGV[1])
return tonumber(ARGV[1])
