-- Claim up to a batch of due entries for one beat, atomically.
-- Each claimed entry's score moves to now + lease (so no other beat sees it as due) and an
-- inflight record keeps the occurrence's due time and when it was first claimed (a late
-- claim stands for the last occurrence due by then). A claim whose lease ran out untouched
-- (its beat died) is taken over: its original due and claim times are returned, so the same
-- occurrence (and the same task id) is sent again. When the score was changed meanwhile (run
-- now, an edit), the score is a new occurrence of its own.
--
-- KEYS[1] = schedule  ZSET  name -> due ms
-- KEYS[2] = entries   HASH  name -> definition JSON
-- KEYS[3] = inflight  HASH  name -> {"due", "at", "beat", "lease_until"}
-- KEYS[4] = state     HASH  only checked: no claim is taken that finish could not record
-- ARGV[1] = beat id
-- ARGV[2] = lease, ms
-- ARGV[3] = batch size
-- ARGV[4] = the latest valid time, ms: a score outside 0..ARGV[4] (-inf, say) was not written
--           by redisbeat; such an entry is claimed at now with recovered = 2, so the beat
--           puts it back on its schedule from its definition instead of sending it
-- ARGV[5] = how far ahead to claim, ms: entries due by now + ARGV[5] are claimed too (the
--           beat sends each when it falls due), so a busy schedule is claimed in fewer,
--           larger batches; a takeover's original due time is returned as it was
-- Returns {now_ms, earliest_remaining_score_ms or -1 (also when that score is not valid),
--          name, definition, due_ms, claimed_ms, recovered (0|1|2|3), name, definition, ...}
-- (3: an occurrence a finish deferred, for its jitter or a run still going, now due)
-- A batch costs a fixed handful of commands whatever its size: one read of the schedule's
-- head, one HMGET per hash, one multi-member ZADD and one multi-field HSET.
local now = now_ms()
local lease_until = now + tonumber(ARGV[2])
-- Spelled once: a number passed to Redis or put in a record is formatted each time.
local now_s, lease_s = tostring(now), tostring(lease_until)
local now_json = json_ms(now_s, now)
local batch = tonumber(ARGV[3])
local max_ms = tonumber(ARGV[4])
local horizon = now + (tonumber(ARGV[5]) or 0)
local function valid(ms)
  return ms ~= nil and ms >= 0 and ms <= max_ms
end
-- The schedule's head, one member past a small batch: the due members and, after them, the
-- earliest score the claim leaves alone, in one read. A larger batch all due reads on. Kept
-- short: a busy beat finds one or two due per claim, and every member read costs its score.
local AHEAD = 2
local limit = math.min(batch, AHEAD) + 1
local head = redis.pcall('ZRANGE', KEYS[1], 0, limit - 1, 'WITHSCORES')
local bad = key_error(head, 1, 'zset')
if bad then
  return bad
end
-- Each score as Redis spelled it and as a number: a number is read from its spelling once.
local names, scores, numbers, n = {}, {}, {}, 0
local stays = nil -- the first score left alone; nil: none (or not known yet)
for i = 1, #head, 2 do
  local score = tonumber(head[i + 1])
  if n == batch or score > horizon then
    stays = score
    break
  end
  n = n + 1
  names[n], scores[n], numbers[n] = head[i], head[i + 1], score
end
local known = stays ~= nil or #head / 2 < limit
if not known and batch > n then
  local more = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', horizon, 'WITHSCORES',
                          'LIMIT', n, batch - n)
  for i = 1, #more, 2 do
    n = n + 1
    names[n], scores[n], numbers[n] = more[i], more[i + 1], tonumber(more[i + 1])
  end
end
local out = {now, -1}
if n == 0 then
  -- An idle beat's claim stays cheap: the other keys are only checked by a claim that writes.
  out[2] = valid(stays) and stays or -1
  return out
end
-- Every read before the first write, each one the type check of its key (in key order).
local definitions, claims
definitions, bad = read_many('HMGET', 2, 'hash', names)
if not bad then
  claims, bad = read_many('HMGET', 3, 'hash', names)
end
bad = bad or key_error(redis.pcall('HEXISTS', KEYS[4], ''), 4, 'hash')
if bad then
  return bad
end
-- Appended to by position: Lua's length operator searches the table each time.
local dropped, moves, records, nd, nm, no = {}, {}, {}, 0, 0, 2
local beat_s = json_string(ARGV[1])
local held = nil -- the earliest lease claimed ahead of its end: another beat's, not over yet
for i = 1, n do
  local name, score = names[i], numbers[i]
  local claim = record(claims[i])
  local lease = claim and tonumber(claim.due) and tonumber(claim.lease_until) == score
  if lease and score > now then
    -- Claiming ahead never takes over a lease before it ends.
    held = math.min(held or score, score)
  elseif not definitions[i] then
    -- A schedule member without a definition: drop it rather than spin on it.
    nd = nd + 1
    dropped[nd] = name
  else
    local occurrence, claimed, recovered = score, now, 0
    local due_s, at_s = scores[i], now_s
    if lease then
      -- A deferred occurrence (3) was not sent yet; a lost lease's (1) may have been.
      occurrence, recovered = tonumber(claim.due), claim.deferred and 3 or 1
      -- A record written before claim times were kept: the claim stood for its due time.
      claimed = tonumber(claim.at) or occurrence
      due_s, at_s = nil, nil
    end
    if not valid(occurrence) or not valid(claimed) then
      occurrence, claimed, recovered = now, now, 2
      due_s, at_s = now_s, now_s
    end
    local at_json = at_s == now_s and now_json or json_ms(at_s, claimed)
    moves[nm + 1], moves[nm + 2] = lease_s, name
    records[nm + 1] = name
    records[nm + 2] = claim_json(json_ms(due_s, occurrence), at_json, beat_s, lease_s)
    nm = nm + 2
    out[no + 1], out[no + 2], out[no + 3], out[no + 4], out[no + 5] =
      name, definitions[i], occurrence, claimed, recovered
    no = no + 5
  end
end
write_many('ZREM', 1, dropped)
write_many('HDEL', 3, dropped)
write_many('ZADD', 1, moves)
write_many('HSET', 3, records)
local earliest = stays
if not known then
  earliest = tonumber(redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')[2])
elseif nm > 0 and (earliest == nil or lease_until < earliest) then
  earliest = lease_until
end
if held and (earliest == nil or held < earliest) then
  earliest = held
end
if valid(earliest) then
  out[2] = earliest
end
return out
