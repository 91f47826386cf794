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
-- KEYS[6] = spent     ZSET  name -> when it left the schedule for good (ms), for the sweep
-- ARGV[1] = beat id
-- ARGV[2] = lease_until the claim set, ms
-- ARGV[3] = pub/sub channel, to wake the beats when a claim is handed back
-- ARGV[4] = set an entry aside after this many failed sends in a row (0 = never)
-- ARGV[5] = the latest valid time, ms (an earliest score outside 0..ARGV[5] is reported as -1)
-- ARGV[6] = how many runs an entry's history keeps (0: no history is written)
-- ARGV[7] = the start of an entry's history key (LIST, newest first; the name is added)
-- ARGV[8] = '1' when the caller checked every outcome's task id to be characters a JSON
--           string takes as they are, and its times and missed count whole numbers in
--           digits (as a beat's are): the script then spells them without checking each
-- then eight per entry:
--   name, action ('sent' | 'skipped' | 'failed' | 'release' | 'defer'), next due ms ('' =
--   none; for 'defer': when to send it), task id, due ms, why ('' = nothing to say: the
--   error of a 'failed' one, why one was skipped or deferred, why occurrences were missed),
--   max_runs ('' = none), occurrences missed before this one ('' = none)
-- 'sent', 'skipped' and 'failed' reschedule at the next due time (or unschedule when there is
-- none). 'release' hands the claim back: the entry is due again at once, at its original due
-- time. 'defer' keeps the claim's occurrence for later (its jitter, or a run still going):
-- the inflight record stays, without a beat, as a lease that ends then, so whichever beat
-- claims it then sends that same occurrence. A 'sent' run is recorded in the state even when
-- the claim was taken over meanwhile: the message went out. A 'failed' one (the message was
-- refused for the entry) counts towards the entry's failures in a row, which a 'sent' one
-- resets. A 'sent' run that makes the entry's total_run_count reach its max_runs takes it off
-- the schedule, and its state says so ("stopped": "max_runs"). Missed occurrences are counted
-- in the state ("missed", "last_missed"), skipped ones too ("skipped", "last_skipped"), and
-- so, at the first send after a pause, are those the pause held back (its "missed", or the
-- "unsent" a resume left); with a history, each outcome but a hand-back or a deferral is
-- pushed onto it.
-- Returns {claims finished, now_ms, earliest score left in the schedule or -1,
--          {names set aside by this call}, {name, what was wrong with its run state, ...},
--          {name, occurrences a pause held back (now counted as missed), ...}}.
-- A batch costs a fixed handful of commands whatever its size: every read first (one per key,
-- each the type check of its key), the outcomes applied in order to what was read, then one
-- write per key of what changed.
local now = now_ms()
local beat, lease_until = ARGV[1], tonumber(ARGV[2])
-- Spelled once: what every send's records repeat (spelled.lua).
local now_s, beat_s = tostring(now), json_string(beat)
local lease_s = json_ms(ARGV[2], lease_until)
local tail = claim_tail(beat_s, lease_s)
-- Whether an entry's score, as read below, is this claim's lease.
local function holds_lease(s)
  return s == lease_s
end
local quarantine_after = tonumber(ARGV[4])
local finished = 0
local released = 0
local set_aside = {}
local garbled = {}
local spent = {} -- now, name, ...

-- What this call reads, by name: the schedule's scores, the claims, the run states and the
-- definitions (false: none). The outcomes change these copies; the changes are written last.
-- Tables are appended to by position: Lua's length operator searches the table each time.
local names, recorded, failed, nn, nr = {}, {}, {}, 0, 0
local history_size, history_prefix = tonumber(ARGV[6]), ARGV[7]
local plain_args = ARGV[8] == '1'
local FIRST, EACH = 9, 8
for i = FIRST, #ARGV, EACH do
  local name, action = ARGV[i], ARGV[i + 1]
  nn = nn + 1
  names[nn] = name
  failed[name] = action == 'failed' or nil
  if action == 'sent' or action == 'failed' or (action == 'skipped' and ARGV[i + 5] ~= '')
      or ARGV[i + 7] ~= '' then
    nr = nr + 1
    recorded[nr] = name
  end
end
local copies = {{}, {}, {}, {}} -- KEYS[1] .. KEYS[4]
local function read(i, command, expected, fields)
  local replies, bad = read_many(command, i, expected, fields)
  if replies then
    for j, field in ipairs(fields) do
      copies[i][field] = replies[j]
    end
  end
  return bad
end
-- The schedule is read as the members that still hold this claim's lease (lease_s here):
-- one range, where reading each member's score would have Redis spell every one as text,
-- the dearest part of the read. Any other member has no score here: it left the schedule,
-- or its score changed (an edit, run now, another beat's claim).
local held = redis.pcall('ZRANGEBYSCORE', KEYS[1], ARGV[2], ARGV[2])
local bad = key_error(held, 1, 'zset')
if bad then
  return bad
end
for i = 1, #held do
  copies[1][held[i]] = lease_s
end
bad = read(2, 'HMGET', 'hash', names) or read(3, 'HMGET', 'hash', recorded)
if bad then
  return bad
end
-- A definition is read only where the claim cannot vouch for it: a claim of this beat's
-- whose score still holds its lease proves the entry is there (removing an entry takes it
-- off the schedule). A failed send's is read, to be set aside with it at the limit.
local unvouched, nu = {}, 0
for i = 1, nr do
  local name = recorded[i]
  local raw = copies[2][name]
  if failed[name] or not holds_lease(copies[1][name]) or not raw
      or not ends_with(raw, tail) then
    nu = nu + 1
    unvouched[nu] = name
  else
    copies[4][name] = true
  end
end
bad = read(4, 'HMGET', 'hash', unvouched)
if bad then
  return bad
end
local score, inflight, states, entries = copies[1], copies[2], copies[3], copies[4]
-- Per key, the names whose copy changed (a name twice is written twice, with its last value).
local changed, counts = {{}, {}, {}, {}}, {0, 0, 0, 0}
local function change(i, name, value)
  local n = counts[i] + 1
  counts[i] = n
  changed[i][n] = name
  copies[i][name] = value
end
-- A new score; one ZADD would refuse is refused here, before any write, with ZADD's error
-- (``spelled``: a whole number of ms, which ZADD takes).
local function move(name, at, spelled)
  if not spelled and tonumber(at) == nil then
    redis.call('ZADD', KEYS[1], at, name)
  end
  change(1, name, at)
end
local quarantined = {} -- name, record, ...
local deferred = false -- whether a claim is kept as a deferral (else every claim ends)

-- The entry's run state; what is not what redisbeat wrote is reported (and replaced, keeping
-- the fields that are still valid).
local function load_state(name)
  local ok, state = pcall(cjson.decode, states[name] or '{}')
  if not ok or type(state) ~= 'table' then
    garbled[#garbled + 1] = name
    garbled[#garbled + 1] = 'not a JSON object'
    return {}
  end
  for _, field in ipairs({'total_run_count', 'failures', 'last_run_at', 'last_sent_at',
                          'missed', 'skipped'}) do
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
    quarantined[#quarantined + 1] = name
    quarantined[#quarantined + 1] = cjson.encode({
      definition = entries[name],
      error = 'its last ' .. failures .. ' sends failed; the last one: ' .. error,
      at = now, by = beat})
    change(4, name, false)
    change(1, name, false)
    change(2, name, false)
    set_aside[#set_aside + 1] = name
  end
  change(3, name, state_json(state))
end

-- What became of one occurrence, counted in the state and pushed onto the history;
-- ``paused``: occurrences a pause that is over held back before it.
local histories = {} -- name, record, ...
local paused_missed = {} -- name, count, ...
local function count(name, due, field, n, reason)
  local state = load_state(name)
  state[field] = (tonumber(state[field]) or 0) + n
  state['last_' .. field] = {at = now, due = due, count = n, reason = reason}
  change(3, name, state_json(state))
end
local function tell(name, action, due, task_id, why, missed, paused, counted)
  if not entries[name] then
    return
  end
  if paused then
    count(name, due, 'missed', paused, 'paused')
    paused_missed[#paused_missed + 1] = name
    paused_missed[#paused_missed + 1] = paused
  end
  if (missed and not counted) or (action == 'skipped' and why ~= '') then
    count(name, due, missed and 'missed' or 'skipped', missed or 1, why)
  end
  if history_size > 0 then
    local reason = why ~= '' and why or (paused and 'paused') or nil
    histories[#histories + 1] = name
    histories[#histories + 1] = cjson.encode({kind = 'send', result = action, due = due,
      at = now, task_id = task_id, beat = beat, reason = reason,
      missed = (missed or paused) and (missed or 0) + (paused or 0) or nil})
  end
end

-- A send recorded in the state (with the occurrences it found missed, ``missed_s`` as the
-- beat spelled them, where the state can be rewritten without decoding it); returns how many
-- occurrences a pause it ends held back, and whether the missed ones were counted.
local function record_send(name, due_s, task_id, limit, moved, missed_s, why)
  if missed_s == '' then
    missed_s = nil
  elseif not plain_args and not string.find(missed_s, '^%d+$') then
    missed_s = false
  end
  local plain = (plain_args or string.find(due_s, '^%d+$')) and missed_s ~= false
    and sent_state(states[name], due_s, now_s,
                   plain_args and '"' .. task_id .. '"' or json_string(task_id),
                   beat_s, limit, missed_s, why)
  if plain then
    change(3, name, plain)
    return nil, missed_s ~= nil
  end
  local state = load_state(name)
  local paused = nil
  if type(state.paused) == 'table' and (tonumber(state.paused['until']) or now) < now then
    paused = tonumber(state.paused.missed) -- sent after the time it was paused until
    state.paused = nil
  end
  if type(state.unsent) == 'table' then -- what a resume found a pause held back
    paused = (paused or 0) + (tonumber(state.unsent.count) or 0)
    state.unsent = nil
  end
  state.failures = nil
  state.last_error = nil
  state.last_run_at = tonumber(due_s)
  state.last_sent_at = now
  state.total_run_count = (tonumber(state.total_run_count) or 0) + 1
  state.last_task_id = task_id
  state.last_beat = beat
  state.stopped = nil
  if limit and state.total_run_count >= limit then
    state.stopped = 'max_runs'
    if moved then
      change(1, name, false)
    end
  end
  change(3, name, state_json(state))
  return paused and paused > 0 and paused or nil, false
end

for i = FIRST, #ARGV, EACH do
  local name, action, next_due, task_id = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
  -- The due time stays a string unless an outcome needs its number (most sends don't).
  local due_s, limit = ARGV[i + 4], tonumber(ARGV[i + 6])
  local why, missed = ARGV[i + 5], tonumber(ARGV[i + 7])
  local moved = false -- whether this claim put the entry at its next due time
  local raw = inflight[name]
  -- A hand-back or a deferral reads its claim's times: only then is the claim decoded.
  local claim, mine = nil, raw and action ~= 'release' and action ~= 'defer'
    and ends_with(raw, tail)
  if not mine then
    claim = record(raw)
    mine = claim ~= nil and claim.beat == beat and tonumber(claim.lease_until) == lease_until
  end
  if mine then
    finished = finished + 1
    change(2, name, false)
    local untouched = holds_lease(score[name])
    if action == 'release' then
      if untouched then
        move(name, claim.due)
        released = released + 1
      end
    elseif action == 'defer' then
      if untouched then
        local at = tonumber(next_due)
        move(name, at)
        change(2, name, cjson.encode({due = tonumber(claim.due), at = tonumber(claim.at),
                                      beat = '', lease_until = at, deferred = why}))
        deferred = true
      end
    else
      if untouched then
        if next_due == '' then
          change(1, name, false)
          spent[#spent + 1] = now
          spent[#spent + 1] = name
        else
          -- As the beat spelled it: Redis takes the string as it is.
          local spelled = plain_args or string.find(next_due, '^%d+$') ~= nil
          move(name, (spelled or tonumber(next_due)) and next_due, spelled)
          moved = true
        end
      end
    end
  end
  -- A failure counts once: a claim taken over meanwhile is the other beat's to count.
  if action == 'failed' and mine and entries[name] then
    record_failure(name, tonumber(due_s), why)
  end
  local paused, counted = nil, false
  if action == 'sent' and entries[name] then
    paused, counted = record_send(name, due_s, task_id, limit, moved, ARGV[i + 7], why)
  end
  -- Most sends have nothing to tell: no history, nothing missed (or counted already) or
  -- skipped.
  if (history_size > 0 or paused or (missed and not counted)
      or (action == 'skipped' and why ~= ''))
      and action ~= 'release' and action ~= 'defer' and (mine or action == 'sent') then
    tell(name, action, tonumber(due_s), task_id, why, missed, paused, counted)
  end
end

-- The quarantine hash is only checked when it is about to be written.
if #quarantined > 0 then
  bad = key_error(redis.pcall('HEXISTS', KEYS[5], ''), 5, 'hash')
  if bad then
    return bad
  end
end
local moves, gone, values, claims, ended = {}, {}, {}, {}, {}
local nm, ng = 0, 0
for _, name in ipairs(changed[1]) do
  local at = score[name]
  if at then
    moves[nm + 1], moves[nm + 2] = at, name
    nm = nm + 2
  else
    ng = ng + 1
    gone[ng] = name
  end
end
for i, name in ipairs(changed[3]) do
  values[2 * i - 1], values[2 * i] = name, states[name]
end
if deferred then
  for _, name in ipairs(changed[2]) do
    if inflight[name] then
      claims[#claims + 1] = name
      claims[#claims + 1] = inflight[name]
    else
      ended[#ended + 1] = name
    end
  end
  write_many('HDEL', 2, ended)
  write_many('HSET', 2, claims)
else
  write_many('HDEL', 2, changed[2])
end
write_many('ZADD', 1, moves)
write_many('ZREM', 1, gone)
write_many('HSET', 3, values)
write_many('HDEL', 4, changed[4])
write_many('HSET', 5, quarantined)
-- A history is bounded: trimmed to twice its size (sends and their runs' outcomes) once it
-- holds half as many again, so most pushes cost one command.
for i = 1, #histories, 2 do
  local key = history_prefix .. histories[i]
  local length = redis.pcall('LPUSH', key, histories[i + 1])
  if type(length) == 'number' and length > 3 * history_size then
    redis.call('LTRIM', key, 0, 2 * history_size - 1)
  end
end
-- The sweep's index only: a key of the wrong type there must not fail the sends' finish.
for first = 1, #spent, CHUNK do
  redis.pcall('ZADD', KEYS[6], chunk(spent, first))
end
if released > 0 then
  -- A wake-up only saves the other beats a wait: one refused (an ACL without the channel)
  -- must not fail the finish after its writes, which Redis would keep.
  redis.pcall('PUBLISH', ARGV[3], 'released')
end
local first = redis.pcall('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
bad = key_error(first, 1, 'zset')
if bad then
  return bad
end
local earliest = first[2] and tonumber(first[2])
if not earliest or earliest < 0 or earliest > tonumber(ARGV[5]) then
  earliest = -1
end
return {finished, now, earliest, set_aside, garbled, paused_missed}
