-- The worker hook's duplicate check of one message redisbeat sent, as a worker receives it
-- (before Celery runs anything), and the marks of a delayed task's start and end.
-- 'receive': the first copy of a try of a task id marks it 'received' and runs. A copy that
-- arrives while a mark stands (another worker received it, started it or ran it) is a
-- duplicate: it is recorded (an entry's run state and history, a delayed task's record) and
-- not run. A redelivery of the message the mark was made for (the broker gave it back: its
-- worker stopped or died before running it to the end) is no copy: it runs, unless it ended.
-- 'started', 'ended': a delayed task's run (an entry's go through track.lua).
--
-- KEYS[1] = mark     STRING  (seen.lua)
-- KEYS[2] = the shard's layout HASH (only read)
-- KEYS[3] = periodic: state HASH name -> run state JSON; delayed: done STRING (its record)
-- KEYS[4] = periodic only: history LIST (newest first)
-- ARGV[1] = 'receive' | 'started' | 'ended'
-- ARGV[2] = 'periodic' | 'delayed'
-- ARGV[3] = name (the entry's, or the delayed task's key)
-- ARGV[4] = task id
-- ARGV[5] = the worker
-- ARGV[6] = how long the mark lasts (ms)
-- ARGV[7] = the layout the worker follows ('4', or '4>8' while a reshard runs)
-- receive only:
-- ARGV[8] = the message's delivery tag ('' not known)
-- ARGV[9] = '1' when the broker says it redelivers the message, else ''
-- ARGV[10] = the due time, ms ('' not known)
-- ARGV[11] = how many runs a history keeps
-- Returns {1} to run it; {0, stage, worker} for a copy: what the mark said, and whose; {-2}
-- when the layout changed (nothing written: the worker reads it again).
if worker_layout_changed(2, ARGV[7]) then
  return {-2}
end
local now = now_ms()
local op, lane, name, task_id, worker = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local ttl = tonumber(ARGV[6])
if op ~= 'receive' then
  mark_run(1, op, worker, now, ttl)
  return {1}
end

local tag, redelivered = ARGV[8], ARGV[9] == '1'
local mark = record(redis.call('GET', KEYS[1]))
local same = mark and ((tag ~= '' and mark.tag == tag) or (tag == '' and redelivered))
if not mark or (same and mark.stage ~= 'ended') then
  mark_seen(1, 'received', tag, worker, now, ttl)
  return {1}
end

local stage = tostring(mark.stage or '')
local first = tostring(mark.worker or '')
local copy = {task_id = task_id, due = tonumber(ARGV[10]), at = now, worker = worker,
              stage = stage, first = first}
if lane == 'delayed' then
  local done = record(redis.call('GET', KEYS[3]))
  if done then
    done.duplicates = (tonumber(done.duplicates) or 0) + 1
    redis.call('SET', KEYS[3], cjson.encode(done), 'KEEPTTL')
  end
  return {0, stage, first}
end

local ok, state = pcall(cjson.decode, redis.call('HGET', KEYS[3], name) or '')
if ok and type(state) == 'table' then
  state.duplicates = (tonumber(state.duplicates) or 0) + 1
  state.last_duplicate = copy
  redis.call('HSET', KEYS[3], name, cjson.encode(state))
  local size = tonumber(ARGV[11]) or 0
  if size > 0 then
    copy.kind = 'duplicate'
    local length = redis.call('LPUSH', KEYS[4], cjson.encode(copy))
    if length > 3 * size then
      redis.call('LTRIM', KEYS[4], 0, 2 * size - 1)
    end
  end
end
return {0, stage, first}
