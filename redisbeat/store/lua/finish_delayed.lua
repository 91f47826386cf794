-- Finish a batch of delayed tasks claimed by one beat: a task sent (or refused for itself,
-- or with nothing to send) leaves the shard, its owner's index with it, and what became of
-- it is kept for a while under its own expiring key; a task handed back is due again at its
-- own time. As for periodic entries, only claims this beat still owns are touched, and a
-- task replaced or moved while it was held (its score no longer the lease) is left as the
-- change made it: a new pending task.
--
-- KEYS[1] = delayed           ZSET
-- KEYS[2] = delayed inflight  HASH
-- KEYS[3] = delayed tasks     HASH
-- ARGV[1] = beat id
-- ARGV[2] = lease_until the claim set, ms
-- ARGV[3] = pub/sub channel, to wake the beats when a claim is handed back
-- ARGV[4] = the latest valid time, ms
-- ARGV[5] = the start of an owner index's key
-- ARGV[6] = the start of a sent task's record key
-- ARGV[7] = how long that record is kept, ms
-- then six per task: key, action ('sent' | 'skipped' | 'failed' | 'release'), next due ms
--   (unused), task id, due ms, error ('' unless failed)
-- Returns {claims finished, now_ms, earliest score left or -1, {}, {}} (finish.lua's shape).
local bad = wrong_type({'zset', 'hash', 'hash'})
if bad then
  return bad
end
local now = now_ms()
local beat, lease_until = ARGV[1], tonumber(ARGV[2])
local keep_ms = tonumber(ARGV[7])
local finished, released = 0, 0
for i = 8, #ARGV, 6 do
  local key, action, task_id = ARGV[i], ARGV[i + 1], ARGV[i + 3]
  local due = tonumber(ARGV[i + 4])
  local claim = record(redis.call('HGET', KEYS[2], key))
  local mine = claim ~= nil and claim.beat == beat and tonumber(claim.lease_until) == lease_until
  local task = nil
  if mine then
    finished = finished + 1
    redis.call('HDEL', KEYS[2], key)
    local untouched = tonumber(redis.call('ZSCORE', KEYS[1], key)) == lease_until
    if action == 'release' then
      if untouched then
        redis.call('ZADD', KEYS[1], claim.due, key)
        released = released + 1
      end
    elseif untouched then
      task = record(redis.call('HGET', KEYS[3], key))
      if task and type(task.owner) == 'string' then
        redis.call('ZREM', ARGV[5] .. task.owner, key)
      end
      redis.call('HDEL', KEYS[3], key)
      redis.call('ZREM', KEYS[1], key)
    end
  end
  -- A send is recorded even when the claim was taken over meanwhile: the message went out.
  if action == 'sent' or (action == 'failed' and mine) then
    local done = {outcome = action, task_id = task_id, due = due, at = now, beat = beat}
    if task then
      done.task, done.owner = task.task, task.owner
    end
    if action == 'failed' then
      done.error = ARGV[i + 5]
    end
    redis.call('SET', ARGV[6] .. key, cjson.encode(done), 'PX', keep_ms)
  end
end
if released > 0 then
  redis.pcall('PUBLISH', ARGV[3], 'released')
end
local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
local earliest = first[2] and tonumber(first[2])
if not earliest or earliest < 0 or earliest > tonumber(ARGV[4]) then
  earliest = -1
end
return {finished, now, earliest, {}, {}}
