-- Finish a batch claimed by one beat.
-- Only claims this beat still owns are touched (another beat may have taken over an expired
-- lease). The schedule score is only moved when it still holds this claim's lease, so an entry
-- removed, edited or run-now meanwhile is neither resurrected nor overwritten.
--
-- KEYS[1] = schedule  ZSET
-- KEYS[2] = inflight  HASH
-- KEYS[3] = state     HASH  name -> run state JSON
-- KEYS[4] = entries   HASH
-- ARGV[1] = beat id
-- ARGV[2] = lease_until the claim set, ms
-- ARGV[3] = pub/sub channel, to wake the beats when a claim is handed back
-- then five per entry:
--   name, action ('sent' | 'skipped' | 'release'), next due ms ('' = none), task id, due ms
-- 'sent' and 'skipped' reschedule at the next due time (or unschedule when there is none).
-- 'release' hands the claim back: the entry is due again at once, at its original due time.
-- A 'sent' run is recorded in the state even when the claim was taken over meanwhile: the
-- message went out.
-- Returns {claims finished, now_ms, earliest score left in the schedule or -1}.
local bad = wrong_type({'zset', 'hash', 'hash', 'hash'})
if bad then
  return bad
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local beat, lease_until = ARGV[1], tonumber(ARGV[2])
local finished = 0
local released = 0
for i = 4, #ARGV, 5 do
  local name, action, next_due, task_id = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
  local due = tonumber(ARGV[i + 4])
  local raw = redis.call('HGET', KEYS[2], name)
  local ok, claim = false, nil
  if raw then
    ok, claim = pcall(cjson.decode, raw)
  end
  if ok and type(claim) == 'table' and claim.beat == beat
      and tonumber(claim.lease_until) == lease_until then
    finished = finished + 1
    redis.call('HDEL', KEYS[2], name)
    local untouched = tonumber(redis.call('ZSCORE', KEYS[1], name)) == lease_until
    if action == 'release' then
      if untouched then
        redis.call('ZADD', KEYS[1], claim.due, name)
        released = released + 1
      end
    else
      if untouched then
        if next_due == '' then
          redis.call('ZREM', KEYS[1], name)
        else
          redis.call('ZADD', KEYS[1], tonumber(next_due), name)
        end
      end
    end
  end
  if action == 'sent' and redis.call('HEXISTS', KEYS[4], name) == 1 then
    local sok, state = pcall(cjson.decode, redis.call('HGET', KEYS[3], name) or '{}')
    if not sok or type(state) ~= 'table' then
      state = {}
    end
    state.last_run_at = due
    state.last_sent_at = now
    state.total_run_count = (tonumber(state.total_run_count) or 0) + 1
    state.last_task_id = task_id
    state.last_beat = beat
    redis.call('HSET', KEYS[3], name, cjson.encode(state))
  end
end
if released > 0 then
  -- A wake-up only saves the other beats a wait: one refused (an ACL without the channel)
  -- must not fail the finish after its writes, which Redis would keep.
  redis.pcall('PUBLISH', ARGV[3], 'released')
end
local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
return {finished, now, first[2] and tonumber(first[2]) or -1}
