-- Take entries out of this shard for a reshard: each one's records are kept, whole, in the
-- shard's moving hash until move_in.lua has written them where the new count puts them. An
-- entry out of its shard's schedule is claimed by no beat, so no occurrence is sent twice.
-- The records: definition, due time, run state, set-aside record, running marker, spent
-- time and, when the mover may read lists (the reshard's user may, an editor's not), the
-- history and the workers' mark of the entry's last send (a copy of that send that arrives
-- after the move is checked in the new shard, and must find it); without lists the history
-- stays here, and the record says so ('history_left'), for the reshard to move it later,
-- and the mark stays until it expires.
--
-- KEYS[1] = entries     HASH     KEYS[6] = moving      HASH  name -> JSON of its records
-- KEYS[2] = schedule    ZSET     KEYS[7] = the shard's layout HASH
-- KEYS[3] = state       HASH     KEYS[8] = running     HASH  (the worker hook's markers)
-- KEYS[4] = inflight    HASH     only read: a claimed entry stays until its beat finishes
-- KEYS[5] = quarantine  HASH     KEYS[9] = spent       ZSET
-- KEYS[10..] = with lists, each name's history LIST (newest first), in the order of ARGV;
--              then the marks (STRING, seen.lua) ARGV names
-- ARGV[1] = the layout the mover follows ('4>8')
-- ARGV[2] = '1': read and take the histories (KEYS[10..]) and the marks; '': leave them
-- ARGV[3..] = in threes: name, the task id of its last send as the mover read it from the
--             run state ('' none), the index in KEYS of that send's mark (0: none)
-- Returns -2 when the layout changed (the reshard ended or another began), else per name:
-- the JSON of its records (also when an earlier, interrupted move took it out), 1 when it
-- is claimed (move it later), 0 when this shard holds nothing of it.
local refusal = refused(7, ARGV[1],
  {'hash', 'zset', 'hash', 'hash', 'hash', 'hash', 'hash', 'hash', 'zset'})
if refusal then
  return refusal
end
local lists = ARGV[2] == '1'
-- The history of the i-th name (none: nil); a key of another type is not one, and stays.
-- Any other refusal (an ACL without LRANGE) fails the move before the entry is taken.
local function history(i)
  if not lists then
    return nil
  end
  local items = redis.pcall('LRANGE', KEYS[9 + i], 0, -1)
  if items.err then
    if string.sub(items.err, 1, 9) == 'WRONGTYPE' then
      return nil
    end
    error(items)
  end
  return #items > 0 and items or nil
end
-- The mark of the entry's last send, with when it expires; none when the run state names
-- another send than the mover read (one sent meanwhile: its mark stays, and expires).
local function mark(records, task_id, index)
  if index == 0 then
    return nil
  end
  local state = record(records.state)
  if not state or state.last_task_id ~= task_id then
    return nil
  end
  local value = redis.pcall('GET', KEYS[index])
  local ttl = type(value) == 'string' and redis.call('PTTL', KEYS[index]) or -2
  if ttl <= 0 then
    return nil
  end
  redis.call('DEL', KEYS[index])
  return {task_id = task_id, mark = value, expires = now_ms() + ttl}
end
local function take(i, name, records)
  records.history = history(i)
  if records.history then
    redis.call('LTRIM', KEYS[9 + i], 1, 0)
  end
  if lists then
    records.seen = mark(records, ARGV[i * 3 + 1], tonumber(ARGV[i * 3 + 2])) or records.seen
  end
  return records
end
local out = {}
for i = 3, #ARGV, 3 do
  local name = ARGV[i]
  local taken = redis.call('HGET', KEYS[6], name)
  if taken then
    local records = cjson.decode(taken)
    if lists and records.history_left then
      -- An editor's move left the history: it goes with the rest now.
      records.history_left = nil
      taken = cjson.encode(take(i / 3, name, records))
      redis.call('HSET', KEYS[6], name, taken)
    end
    out[#out + 1] = taken
  elseif redis.call('HEXISTS', KEYS[4], name) == 1 then
    out[#out + 1] = 1
  else
    local records = take(i / 3, name, {
      definition = redis.call('HGET', KEYS[1], name) or nil,
      score = redis.call('ZSCORE', KEYS[2], name) or nil,
      state = redis.call('HGET', KEYS[3], name) or nil,
      quarantine = redis.call('HGET', KEYS[5], name) or nil,
      running = redis.call('HGET', KEYS[8], name) or nil,
      spent = redis.call('ZSCORE', KEYS[9], name) or nil,
    })
    if next(records) == nil then
      out[#out + 1] = 0
    else
      records.history_left = not lists or nil
      taken = cjson.encode(records)
      redis.call('HSET', KEYS[6], name, taken)
      redis.call('HDEL', KEYS[1], name)
      redis.call('ZREM', KEYS[2], name)
      redis.call('HDEL', KEYS[3], name)
      redis.call('HDEL', KEYS[5], name)
      redis.call('HDEL', KEYS[8], name)
      redis.call('ZREM', KEYS[9], name)
      out[#out + 1] = taken
    end
  end
end
return out
