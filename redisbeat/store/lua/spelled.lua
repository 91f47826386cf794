-- The two records every send writes, a claim and a run state, spelled as JSON with their
-- fields in a fixed order: the finish then checks a claim and rewrites a run state by
-- matching and joining strings, where decoding and encoding would cost more than the rest
-- of the send (a script spends most of cjson's time formatting numbers). Both are plain
-- JSON: a record spelled otherwise (by another script, an older release, a person) takes the
-- decoding path, and is written back in this spelling.

-- A JSON string; the characters of task ids and beat ids are taken as they are.
local function json_string(s)
  if string.find(s, '^[%w%-%.:_@]*$') then
    return '"' .. s .. '"'
  end
  return cjson.encode(s)
end
-- ``s`` where it spells a whole number of milliseconds, else ``n`` as cjson would spell it.
local function json_ms(s, n)
  if type(s) == 'string' and string.find(s, '^%d+$') then
    return s
  end
  return tostring(n)
end

-- A claim record; ``beat`` and ``lease`` are spelled already (json_string, json_ms).
local function claim_json(due, at, beat, lease)
  return '{"due":' .. due .. ',"at":' .. at .. ',"beat":' .. beat .. ',"lease_until":' .. lease
    .. '}'
end
-- How a claim record of this beat under this lease ends (both spelled already).
local function claim_tail(beat, lease)
  return ',"beat":' .. beat .. ',"lease_until":' .. lease .. '}'
end
-- Whether ``s`` ends with ``tail``, compared in place (string.sub would make a string).
local function ends_with(s, tail)
  return #s >= #tail and string.find(s, tail, #s - #tail + 1, true) ~= nil
end

-- A run state: what every send writes first, then (when there is one) the count of missed
-- occurrences, then the rest of the fields.
local NUMBER = '%d+'
local STATE_HEAD = '^{"last_run_at":' .. NUMBER .. ',"last_sent_at":' .. NUMBER
  .. ',"total_run_count":(%d+),"last_task_id":"[^"\\]*","last_beat":"[^"\\]*"(.*)$'
-- A beat behind schedule counts missed occurrences at nearly every send: the count comes
-- right after what every send writes, so the finish adds to it by matching strings too.
local MISSED_HEAD = '^,"missed":(%d+),"last_missed":{"at":%d+,"due":%d+,"count":%d+,'
  .. '"reason":"[^"\\]*"}(.*)$'

-- A whole number of milliseconds (or a count) as cjson spells it; nil for any other value.
local function whole(n)
  if type(n) == 'number' and n >= 0 and n < 1e14 and n == math.floor(n) then
    return tostring(n)
  end
  return nil
end
-- The missed count and its last event, spelled; nil unless each part has the type and the
-- characters that spelling takes (any other is written by cjson, among the rest).
local function missed_block(total, at, due, count, reason)
  total, at, due, count = whole(total), whole(at), whole(due), whole(count)
  if not (total and at and due and count) or type(reason) ~= 'string'
      or not string.find(reason, '^[%w%-%.:_@ ]*$') then
    return nil
  end
  return ',"missed":' .. total .. ',"last_missed":{"at":' .. at .. ',"due":' .. due
    .. ',"count":' .. count .. ',"reason":"' .. reason .. '"}'
end
-- Whether the counter ``field`` (spelled '"name":') in ``rest`` is absent or a number.
local function counter(rest, field)
  local at = string.find(rest, field, 1, true)
  local digit = at and string.byte(rest, at + #field)
  return not at or (digit ~= nil and digit >= 48 and digit <= 57)
end
-- The fields a send changes besides those it writes first: their presence needs the decoding
-- path, as do counters that are not numbers (reported there).
local CHANGED_BY_A_SEND = {'"paused":', '"unsent":', '"failures":', '"last_error":', '"stopped":'}

local function state_json(state)
  local run, sent, count = state.last_run_at, state.last_sent_at, state.total_run_count
  local task, by = state.last_task_id, state.last_beat
  if type(run) ~= 'number' or type(sent) ~= 'number' or type(count) ~= 'number'
      or type(task) ~= 'string' or type(by) ~= 'string' then
    return cjson.encode(state)
  end
  local missed, last = state.missed, state.last_missed
  local block = nil
  if type(last) == 'table' then
    local fields = 0
    for _ in pairs(last) do
      fields = fields + 1
    end
    block = fields == 4 and missed_block(missed, last.at, last.due, last.count, last.reason)
  end
  state.last_run_at, state.last_sent_at, state.total_run_count = nil, nil, nil
  state.last_task_id, state.last_beat = nil, nil
  if block then
    state.missed, state.last_missed = nil, nil
  end
  local rest = cjson.encode(state)
  state.last_run_at, state.last_sent_at, state.total_run_count = run, sent, count
  state.last_task_id, state.last_beat = task, by
  state.missed, state.last_missed = missed, last
  rest = rest == '{}' and '}' or ',' .. string.sub(rest, 2)
  return '{"last_run_at":' .. tostring(run) .. ',"last_sent_at":' .. tostring(sent)
    .. ',"total_run_count":' .. tostring(count) .. ',"last_task_id":' .. json_string(task)
    .. ',"last_beat":' .. json_string(by) .. (block or '') .. rest
end

-- The rest of a run state after a send that found ``missed`` (a count, spelled) occurrences
-- missed before it, for ``why``; nil when it needs the decoding path. ``total`` and ``after``:
-- the count the rest starts with and what follows its block (MISSED_HEAD), nil when it
-- starts with none.
local function missed_rest(rest, missed, now, due, why, total, after)
  if total then
    total = tonumber(total)
  elseif string.find(rest, '"missed":', 1, true) or string.find(rest, '"last_missed":', 1, true) then
    return nil -- counted before, and spelled otherwise
  else
    total, after = 0, rest
  end
  total = total + tonumber(missed)
  if total >= 1e14 or not string.find(why, '^[%w%-%.:_@ ]*$') then
    return nil
  end
  -- %d: a whole number below 1e14 spelled as cjson would, at half the cost of tostring's %.14g.
  return ',"missed":' .. string.format('%d', total) .. ',"last_missed":{"at":' .. now
    .. ',"due":' .. due .. ',"count":' .. missed .. ',"reason":"' .. why .. '"}' .. after
end

-- The run state after a plain send (no pause, failure or stop to clear, no max_runs
-- reached), from the stored one (false: none) without decoding it; nil when it needs the
-- decoding path. ``due``, ``now``, ``task`` and ``beat`` are spelled already, as is
-- ``missed`` (nil: none), the occurrences it found missed before it (for ``why``).
local function sent_state(raw, due, now, task, beat, limit, missed, why)
  local count, rest, total, after = 0, '}', nil, nil
  if raw then
    count, rest = string.match(raw, STATE_HEAD)
    if not count or string.sub(rest, -1) ~= '}' then
      return nil
    end
    if rest ~= '}' then -- most states hold nothing else, or the missed count alone
      total, after = string.match(rest, MISSED_HEAD)
      if after ~= '}' then
        for _, field in ipairs(CHANGED_BY_A_SEND) do
          if string.find(rest, field, 1, true) then
            return nil
          end
        end
        if not counter(rest, '"missed":') or not counter(rest, '"skipped":') then
          return nil
        end
      end
    end
    count = tonumber(count)
  end
  count = count + 1
  if (limit and count >= limit) or count >= 1e14 then
    return nil
  end
  if missed then
    rest = missed_rest(rest, missed, now, due, why, total, after)
    if not rest then
      return nil
    end
  end
  return '{"last_run_at":' .. due .. ',"last_sent_at":' .. now .. ',"total_run_count":'
    .. string.format('%d', count) .. ',"last_task_id":' .. task .. ',"last_beat":' .. beat .. rest
end
