-- Write one entry definition, compare-and-set against the definition the writer read.
--
-- KEYS[1] = entries     HASH
-- KEYS[2] = schedule    ZSET
-- KEYS[3] = quarantine  HASH
-- KEYS[4] = the new source's SET of names
-- KEYS[5] = the previous source's SET of names (same as KEYS[4] when unchanged)
-- KEYS[6] = the shard's layout HASH
-- KEYS[7] = state       HASH  only read: the pause the due time was worked out for
-- ARGV[1] = name
-- ARGV[2] = the definition the writer read ('' when there was none)
-- ARGV[3] = the new definition
-- ARGV[4] = due ms to schedule at ('' = not scheduled: disabled or nothing left to run)
-- ARGV[5] = '1' to leave the schedule as it is (the edit did not change when the entry runs)
-- ARGV[6] = pub/sub channel, to wake the beats when it is written
-- ARGV[7] = the layout the writer followed ('4', or '4>8' during a reshard)
-- ARGV[8] = the pause the writer read: '' none, '-' until resumed, else until when (ms)
-- ARGV[9] = the schedule score the writer read ('' none): the due time ARGV[4] was worked
--           out with the claim that score showed (a claim's occurrence is not due again)
-- A definition written again as it is stored, with a due time, puts an entry that is off its
-- schedule back on it (its schedule key was deleted, say); one on its schedule stays as it is.
-- Returns 1 when written (or put back on its schedule), 0 when the stored definition was
--         already identical,
--         -1 when the stored definition (or the pause, or the score of a change of timing)
--            is not the one the writer read (read again),
--         -2 when the layout changed (read the layout again, then the entry).
local refusal = refused(6, ARGV[7], {'hash', 'zset', 'hash', 'set', 'set'})
  or key_error(redis.pcall('HEXISTS', KEYS[7], ''), 7, 'hash')
if refusal then
  return refusal
end
local current = redis.call('HGET', KEYS[1], ARGV[1]) or ''
if current ~= ARGV[2] then
  return -1
end
if ARGV[5] ~= '1' then
  -- Paused or resumed, claimed, sent or rescheduled since it was read: the due time was
  -- worked out for another state; work it out again.
  local score = redis.call('ZSCORE', KEYS[2], ARGV[1])
  if pause_token(redis.call('HGET', KEYS[7], ARGV[1]), now_ms()) ~= ARGV[8]
      or (ARGV[9] == '') ~= (not score)
      or (score and tonumber(score) ~= tonumber(ARGV[9])) then
    return -1
  end
end
redis.call('HDEL', KEYS[3], ARGV[1])
local unchanged = current == ARGV[3]
-- An unchanged definition written with a due time goes on: the check above found it off
-- its schedule (ARGV[9] '' with no score), and this puts it back.
if unchanged and (ARGV[5] == '1' or ARGV[4] == '') then
  return 0
end
if not unchanged then
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
  if KEYS[5] ~= KEYS[4] then
    redis.call('SREM', KEYS[5], ARGV[1])
  end
  redis.call('SADD', KEYS[4], ARGV[1])
end
if ARGV[5] ~= '1' then
  if ARGV[4] == '' then
    redis.call('ZREM', KEYS[2], ARGV[1])
  else
    redis.call('ZADD', KEYS[2], tonumber(ARGV[4]), ARGV[1])
  end
end
redis.call('PUBLISH', ARGV[6], ARGV[1])
return 1
