-- Finish a batch claimed by one beat.
-- Only claims this beat still owns are touched (another beat may have taken over an expired
-- lease). The schedule score is only moved when it still holds this claim's lease, so an entry
-- removed, edited or run-now meanwhile is neither resurrected nor overwritten.
--
-- KEYS[1] = schedule  ZSET
-- KEYS[2] = inflight  HASH
-- KEYS[3] = state     HASH  name -> run state JSON
-- KEYS[4] = entries   HASH
-- KEYS[5] = quarantine HASH  name -> {"definition", "error", "at", "by"}
-- ARGV[1] = beat id
-- ARGV[2] = lease_until the claim set, ms
-- ARGV[3] = pub/sub channel, to wake the beats when a claim is handed back
-- ARGV[4] = set an entry aside after this many failed sends in a row (0 = never)
-- ARGV[5] = the latest valid time, ms (an earliest score outside 0..ARGV[5] is reported as -1)
-- then six per entry:
--   name, action ('sent' | 'skipped' | 'failed' | 'release'), next due ms ('' = none),
--   task id, due ms, error ('' unless failed)
-- 'sent', 'skipped' and 'failed' reschedule at the next due time (or unschedule when there is
-- none). 'release' hands the claim back: the entry is due again at once, at its original due
-- time. A 'sent' run is recorded in the state even when the claim was taken over meanwhile:
-- the message went out. A 'failed' one (the message was refused for the entry) counts
-- towards the entry's failures in a row, which a 'sent' one resets.
-- Returns {claims finished, now_ms, earliest score left in the schedule or -1,
--          {names set aside by this call}, {name, what was wrong with its run state, ...}}.
local bad = wrong_type({'zset', 'hash', 'hash', 'hash', 'hash'})
if bad then
  return bad
end
local now = now_ms()
local beat, lease_until = ARGV[1], tonumber(ARGV[2])
local quarantine_after = tonumber(ARGV[4])
local finished = 0
local released = 0
local set_aside = {}
local garbled = {}

-- The entry's run state; what is not what redisbeat wrote is reported (and replaced, keeping
-- the fields that are still valid).
local function load_state(name)
  local ok, state = pcall(cjson.decode, redis.call('HGET', KEYS[3], name) or '{}')
  if not ok or type(state) ~= 'table' then
    garbled[#garbled + 1] = name
    garbled[#garbled + 1] = 'not a JSON object'
    return {}
  end
  for _, field in ipairs({'total_run_count', 'failures', 'last_run_at', 'last_sent_at'}) do
    if state[field] ~= nil and type(state[field]) ~= 'number' then
      garbled[#garbled + 1] = name
      garbled[#garbled + 1] = field .. ' is not a number'
      state[field] = nil
    end
  end
  return state
end

-- One more failed send in a row; at the limit the entry is set aside like a corrupt one.
local function record_failure(name, due, error)
  local state = load_state(name)
  local failures = (tonumber(state.failures) or 0) + 1
  state.failures = failures
  state.last_error = error
  state.last_failed_at = now
  state.last_failed_due = due
  if quarantine_after > 0 and failures >= quarantine_after then
    state.failures = nil
    redis.call('HSET', KEYS[5], name, cjson.encode({
      definition = redis.call('HGET', KEYS[4], name),
      error = 'its last ' .. failures .. ' sends failed; the last one: ' .. error,
      at = now, by = beat}))
    redis.call('HDEL', KEYS[4], name)
    redis.call('ZREM', KEYS[1], name)
    redis.call('HDEL', KEYS[2], name)
    set_aside[#set_aside + 1] = name
  end
  redis.call('HSET', KEYS[3], name, cjson.encode(state))
end

for i = 6, #ARGV, 6 do
  local name, action, next_due, task_id = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
  local due = tonumber(ARGV[i + 4])
  local claim = record(redis.call('HGET', KEYS[2], name))
  local mine = claim ~= nil and claim.beat == beat
      and tonumber(claim.lease_until) == lease_until
  if mine then
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
  -- A failure counts once: a claim taken over meanwhile is the other beat's to count.
  if action == 'failed' and mine and redis.call('HEXISTS', KEYS[4], name) == 1 then
    record_failure(name, due, ARGV[i + 5])
  end
  if action == 'sent' and redis.call('HEXISTS', KEYS[4], name) == 1 then
    local state = load_state(name)
    state.failures = nil
    state.last_error = nil
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
local earliest = first[2] and tonumber(first[2])
if not earliest or earliest < 0 or earliest > tonumber(ARGV[5]) then
  earliest = -1
end
return {finished, now, earliest, set_aside, garbled}
