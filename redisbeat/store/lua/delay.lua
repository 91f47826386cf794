-- Write one delayed task: a new one, or the replacement of the pending task under its key.
-- The task's due time goes into the shard's delayed schedule and into its owner's index;
-- a replaced task leaves its previous owner's index. A task a beat is sending meanwhile is
-- sent as it was (it was due first); the replacement is a new pending task.
--
-- KEYS[1] = delayed           ZSET  key -> due ms
-- KEYS[2] = delayed tasks     HASH  key -> JSON {task, args, kwargs, options, owner}
-- KEYS[3] = the shard's layout HASH
-- KEYS[4] = delayed inflight  HASH  only read, for ARGV[9]
-- ARGV[1] = key
-- ARGV[2] = the task's JSON record
-- ARGV[3] = due ms, or '' to count ARGV[4] from now (the Redis clock)
-- ARGV[4] = countdown ms
-- ARGV[5] = owner ('' = none)
-- ARGV[6] = the start of an owner index's key (the owner follows; same hash tag)
-- ARGV[7] = pub/sub channel to wake the beats ('' = do not publish)
-- ARGV[8] = the layout the writer followed
-- ARGV[9] = '1': write only while a beat holds the task here (a reshard left it in its old
--           shard for that: once the beat is done, the reshard moves it, and the writer
--           must look again)
-- Returns the due ms, -2 when the layout changed (read it again), or -3 when ARGV[9] asked
-- for a held task and none is (look where it is again).
local refusal = refused(3, ARGV[8], {'zset', 'hash'})
if refusal then
  return refusal
end
local key = ARGV[1]
if ARGV[9] == '1' then
  local claim = record(redis.call('HGET', KEYS[4], key))
  local score = tonumber(redis.call('ZSCORE', KEYS[1], key))
  if not (claim and score and tonumber(claim.lease_until) == score) then
    return -3
  end
end
local due = tonumber(ARGV[3])
if due == nil then
  due = now_ms() + tonumber(ARGV[4])
end
local old = record(redis.call('HGET', KEYS[2], key))
if old and type(old.owner) == 'string' then
  redis.call('ZREM', ARGV[6] .. old.owner, key)
end
redis.call('HSET', KEYS[2], key, ARGV[2])
redis.call('ZADD', KEYS[1], due, key)
if ARGV[5] ~= '' then
  redis.call('ZADD', ARGV[6] .. ARGV[5], due, key)
end
if ARGV[7] ~= '' then
  redis.pcall('PUBLISH', ARGV[7], 'delayed')
end
return due
