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
-- Returns {now_ms, earliest_remaining_score_ms or -1 (also when that score is not valid),
--          name, definition, due_ms, claimed_ms, recovered (0|1|2), name, definition, ...}
local now = now_ms()
local lease_until = now + tonumber(ARGV[2])
local max_ms = tonumber(ARGV[4])
local function valid(ms)
  return ms ~= nil and ms >= 0 and ms <= max_ms
end
local due = redis.pcall('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'WITHSCORES',
                        'LIMIT', 0, tonumber(ARGV[3]))
local bad = key_error(due, 1, 'zset')
if not bad and #due > 0 then
  -- Only a claim that will write checks the other keys: an idle beat's claim stays cheap.
  bad = wrong_type({'zset', 'hash', 'hash', 'hash'})
end
if bad then
  return bad
end
local out = {now, -1}
for i = 1, #due, 2 do
  local name = due[i]
  local definition = redis.call('HGET', KEYS[2], name)
  if not definition then
    -- A schedule member without a definition: drop it rather than spin on it.
    redis.call('ZREM', KEYS[1], name)
    redis.call('HDEL', KEYS[3], name)
  else
    local occurrence, claimed, recovered = tonumber(due[i + 1]), now, 0
    local claim = record(redis.call('HGET', KEYS[3], name))
    if claim and tonumber(claim.due) and tonumber(claim.lease_until) == tonumber(due[i + 1]) then
      occurrence, recovered = tonumber(claim.due), 1
      -- A record written before claim times were kept: the claim stood for its due time.
      claimed = tonumber(claim.at) or occurrence
    end
    if not valid(occurrence) or not valid(claimed) then
      occurrence, claimed, recovered = now, now, 2
    end
    redis.call('ZADD', KEYS[1], lease_until, name)
    redis.call('HSET', KEYS[3], name, cjson.encode(
      {due = occurrence, at = claimed, beat = ARGV[1], lease_until = lease_until}))
    out[#out + 1] = name
    out[#out + 1] = definition
    out[#out + 1] = occurrence
    out[#out + 1] = claimed
    out[#out + 1] = recovered
  end
end
local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
if first[2] and valid(tonumber(first[2])) then
  out[2] = tonumber(first[2])
end
return out
