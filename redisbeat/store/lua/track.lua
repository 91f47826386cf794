-- Record a run of an entry's task on a worker (the worker hook): its start, or its end
-- (a run the worker could not start ends without a start, and is counted in KEYS[7]).
-- A start marks the entry as running (for its overlap policy) until its end, or until the
-- marker's "until" passes (a worker killed mid-run never says it ended). An end clears the
-- marker (only its own run's: an overlapping run may hold it), records the outcome in the
-- entry's run state ("last_outcome") and, with a history, pushes it there; an occurrence
-- waiting for this run to end (overlap="buffer_one") is made due at once.
--
-- KEYS[1] = running  HASH  name -> {"task_id", "due", "worker", "started", "until"}
-- KEYS[2] = state    HASH  name -> run state JSON
-- KEYS[3] = history  LIST  the entry's (newest first)
-- KEYS[4] = schedule ZSET
-- KEYS[5] = inflight HASH  name -> claim JSON
-- KEYS[6] = the run's mark STRING (seen.lua): the duplicate check's, started or ended
-- KEYS[7] = not-started HASH  "<outcome>:<task>" -> runs the workers could not start
-- KEYS[8] = entries  HASH  name -> definition (only checked)
-- KEYS[9] = the shard's layout HASH (only read)
-- KEYS[10] = moving  HASH  name -> records a reshard set aside (only checked)
-- ARGV[1] = 'start' | 'end' | 'count' (only counts a delayed task's run in KEYS[7])
-- ARGV[2] = name
-- ARGV[3] = the worker's record JSON (task_id, due, worker; an end adds outcome, exception,
--           and for a run that could not start, task and detail: why, in words)
-- ARGV[4] = start: how long the marker counts (ms); end: how many runs a history keeps
-- ARGV[5] = pub/sub channel, to wake the beats for an occurrence that waited
-- ARGV[6] = how long the run's mark lasts (ms; 0: the duplicate check is off)
-- ARGV[7] = end: the field of KEYS[7] that counts this run ('': it started)
-- ARGV[8] = the layout the worker follows ('4', or '4>8' while a reshard runs)
-- ARGV[9] = '1': this is the entry's old shard, a reshard moving it (it must be here)
-- Returns 1, or 0 when the end found no entry (it is gone); -2 when the layout changed (read
-- it again), -3 when a reshard has set the entry aside (it is about to arrive in its new
-- shard: look again), -4 when the old shard holds it no more (write in its new shard).
-- Nothing is written then, so nothing lands where no one reads it.
if worker_layout_changed(9, ARGV[8]) then
  return -2
end
local name = ARGV[2]
if ARGV[9] == '1' and redis.call('HEXISTS', KEYS[8], name) == 0 then
  return redis.call('HEXISTS', KEYS[10], name) == 1 and -3 or -4
end
if ARGV[1] == 'count' then
  redis.call('HINCRBY', KEYS[7], ARGV[7], 1)
  return 1
end
local now = now_ms()
local ok, run = pcall(cjson.decode, ARGV[3])
if not ok or type(run) ~= 'table' then
  return redis.error_reply('ERR the run record is not a JSON object')
end
mark_run(6, ARGV[1] == 'start' and 'started' or 'ended', tostring(run.worker or ''), now,
         tonumber(ARGV[6]) or 0)
if (ARGV[7] or '') ~= '' then
  redis.call('HINCRBY', KEYS[7], ARGV[7], 1)
end
if ARGV[1] == 'start' then
  run.started = now
  run['until'] = now + tonumber(ARGV[4])
  redis.call('HSET', KEYS[1], name, cjson.encode(run))
  return 1
end

-- A try's end clears its own run's marker, not a later try's: a retry may start (on another
-- worker process) before the try it retries has recorded its end.
local function try(r)
  return tonumber(r.retries) or 0
end
local marker = record(redis.call('HGET', KEYS[1], name))
local same = marker and marker.task_id == run.task_id
if same and try(marker) <= try(run) then
  redis.call('HDEL', KEYS[1], name)
end
if same and tonumber(marker.started) and try(marker) == try(run) then
  run.started = tonumber(marker.started)
end
run.ended = now
if run.started then
  run.runtime = now - run.started
end
run.kind = 'run'

-- A buffered occurrence waiting for a run to end is due now.
local waiting = record(redis.call('HGET', KEYS[5], name))
if waiting and waiting.deferred == 'overlap' and waiting.beat == ''
    and tonumber(redis.call('ZSCORE', KEYS[4], name)) == tonumber(waiting.lease_until) then
  waiting.lease_until = now
  redis.call('HSET', KEYS[5], name, cjson.encode(waiting))
  redis.call('ZADD', KEYS[4], now, name)
  redis.pcall('PUBLISH', ARGV[5], 'released')
end

local raw = redis.call('HGET', KEYS[2], name)
if not raw then
  -- A worker may end a run before the beat that sent it records the send (a message it
  -- refused at once, a quick task): the outcome starts the state of an entry that exists.
  if redis.call('HEXISTS', KEYS[8], name) == 0 then
    return 0
  end
  raw = '{}'
end
local decoded, state = pcall(cjson.decode, raw)
local last = decoded and type(state) == 'table' and state.last_outcome
-- The last try's outcome stays the entry's when an earlier try's end is recorded after it.
local later = type(last) == 'table' and last.task_id == run.task_id and try(last) > try(run)
if decoded and type(state) == 'table' and not later then
  state.last_outcome = {task_id = run.task_id, due = run.due, outcome = run.outcome,
                        exception = run.exception, at = now, runtime = run.runtime,
                        detail = run.detail, retries = run.retries}
  redis.call('HSET', KEYS[2], name, cjson.encode(state))
end
local size = tonumber(ARGV[4])
if size > 0 then
  local length = redis.call('LPUSH', KEYS[3], cjson.encode(run))
  if length > 3 * size then
    redis.call('LTRIM', KEYS[3], 0, 2 * size - 1)
  end
end
return 1
