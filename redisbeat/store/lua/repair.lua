-- Put an entry whose schedule score is not a valid time back on its schedule, unless the
-- score changed meanwhile (an edit, or another beat's repair).
--
-- KEYS[1] = schedule  ZSET
-- ARGV[1] = name
-- ARGV[2] = the score read (as Redis spells it: 'inf', '-inf', a number)
-- ARGV[3] = the due time to set, ms ('' = take it off the schedule)
-- ARGV[4] = pub/sub channel, to wake the beats when it is repaired
-- Returns 1 when repaired, 0 when the score had changed.
local bad = wrong_type({'zset'})
if bad then
  return bad
end
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not score or tonumber(score) ~= tonumber(ARGV[2]) then
  return 0
end
if ARGV[3] == '' then
  redis.call('ZREM', KEYS[1], ARGV[1])
else
  redis.call('ZADD', KEYS[1], tonumber(ARGV[3]), ARGV[1])
end
redis.call('PUBLISH', ARGV[4], ARGV[1])
return 1
