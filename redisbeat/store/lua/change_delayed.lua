-- Cancel a pending delayed task, or move it to another time: either the change wins (the
-- task is not sent, or sent at its new time) or it comes too late: a beat has claimed the
-- task (when due, or up to redisbeat_claim_ahead_seconds before), and sends it once, at its
-- old time.
--
-- KEYS[1] = delayed          ZSET
-- KEYS[2] = delayed tasks    HASH
-- KEYS[3] = delayed inflight HASH  key -> {"due", "at", "beat", "lease_until"}
-- KEYS[4] = the shard's layout HASH
-- ARGV[1] = key
-- ARGV[2] = the start of an owner index's key
-- ARGV[3] = 'cancel', or 'at' (ARGV[4]: due ms), 'in' (ARGV[4]: ms from now) or 'by'
--           (ARGV[4]: ms added to the current due time, negative to bring it forward)
-- ARGV[5] = pub/sub channel to wake the beats
-- ARGV[6] = the layout the writer followed ('4', or '4>8' during a reshard)
-- Returns {1, due ms (0 when cancelled)}; {0, due ms}: too late, a beat is sending it;
--         {-1, 0}: no pending task has that key; -2: the layout changed (read it again).
local refusal = refused(4, ARGV[6], {'zset', 'hash', 'hash'})
if refusal then
  return refusal
end
local key, op = ARGV[1], ARGV[3]
local task = record(redis.call('HGET', KEYS[2], key))
local score = tonumber(redis.call('ZSCORE', KEYS[1], key))
if not task or not score then
  return {-1, 0}
end
local claim = record(redis.call('HGET', KEYS[3], key))
if claim and tonumber(claim.lease_until) == score then
  return {0, tonumber(claim.due) or score}
end
local due = score
local owner = type(task.owner) == 'string' and ARGV[2] .. task.owner or nil
if op == 'cancel' then
  redis.call('HDEL', KEYS[2], key)
  redis.call('ZREM', KEYS[1], key)
  if owner then
    redis.call('ZREM', owner, key)
  end
  return {1, 0}
end
local amount = tonumber(ARGV[4])
if op == 'at' then
  due = amount
elseif op == 'in' then
  due = now_ms() + amount
else
  due = math.max(0, due + amount)
end
redis.call('ZADD', KEYS[1], due, key)
if owner then
  redis.call('ZADD', owner, due, key)
end
redis.pcall('PUBLISH', ARGV[5], 'delayed')
return {1, due}
