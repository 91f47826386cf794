-- Pause an entry (until a time, or until it is resumed), or resume it, and wake the beats.
-- The pause is a field of the entry's run state ("paused": {"until", "note", "at"}), so it
-- moves with the entry in a reshard; the schedule holds the due time it resumes at (none
-- while paused until resumed). A finish that sends after "until" drops the field.
--
-- KEYS[1] = entries  HASH
-- KEYS[2] = schedule ZSET
-- KEYS[3] = state    HASH  name -> run state JSON
-- KEYS[4] = the shard's layout HASH
-- ARGV[1] = name
-- ARGV[2] = the due time the caller read ('' = none): the new one was worked out from it
-- ARGV[3] = the new due time ('' = off the schedule)
-- ARGV[4] = the pause record JSON ('' = resume: the record goes)
-- ARGV[5] = pub/sub channel
-- ARGV[6] = the layout the caller followed ('4', or '4>8' during a reshard)
-- ARGV[7] = on a resume, how many occurrences the pause held back: kept in the state
--           ("unsent") until the next send counts them as missed
-- Returns 1 done, 0 when no entry of that name exists, -1 when its due time changed since
-- it was read (read again), -2 when the layout changed (read it again).
local refusal = refused(4, ARGV[6], {'hash', 'zset', 'hash'})
if refusal then
  return refusal
end
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then
  return 0
end
local score = redis.call('ZSCORE', KEYS[2], ARGV[1])
if (score and tonumber(score) or '') ~= (tonumber(ARGV[2]) or '') then
  return -1
end
local ok, state = pcall(cjson.decode, redis.call('HGET', KEYS[3], ARGV[1]) or '{}')
if not ok or type(state) ~= 'table' then
  state = {} -- what redisbeat did not write is replaced, as the finish replaces it
end
if ARGV[4] == '' then
  state.paused = nil
  if (tonumber(ARGV[7]) or 0) > 0 then
    state.unsent = {count = tonumber(ARGV[7])}
  end
else
  state.paused = cjson.decode(ARGV[4])
end
if next(state) == nil then
  redis.call('HDEL', KEYS[3], ARGV[1])
else
  redis.call('HSET', KEYS[3], ARGV[1], cjson.encode(state))
end
if ARGV[3] == '' then
  redis.call('ZREM', KEYS[2], ARGV[1])
else
  redis.call('ZADD', KEYS[2], tonumber(ARGV[3]), ARGV[1])
end
redis.call('PUBLISH', ARGV[5], ARGV[1])
return 1
