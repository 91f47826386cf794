-- Record that a beat is alive; at a housekeeping heartbeat (ARGV[5] = '1'), also forget beats
-- silent for longer than the time-to-live and look for scores past any valid time. An idle
-- beat's heartbeat is most of what it costs Redis: an ordinary one runs four commands.
--
-- KEYS[1] = beats  ZSET  beat id -> last heartbeat ms
-- KEYS[2] = config   HASH  the version of the beat_schedule the deployment follows
-- KEYS[3] = schedule ZSET  only read: members whose score is past any valid time (+inf)
--                          are never due, so the heartbeat is where they are found
-- KEYS[4] = layout   HASH  how the entries are split (a reshard changes it), only read; and
--                          the stored format, checked first and recorded where none is
--                          (format_refused, in the prelude)
-- ARGV[1] = beat id
-- ARGV[2] = time-to-live, ms
-- ARGV[3] = the latest valid time, ms
-- ARGV[4] = the newest stored format this beat reads (recorded when none is)
-- ARGV[5] = '1' for a housekeeping heartbeat, else ''
-- Returns {now_ms, 1 when this beat was not registered (first beat, or silent too long),
--          the configuration's version or '' when there is none (new, or Redis lost it),
--          the layout's shards and moving_to ('' where not recorded),
--          name, score, ... for up to 10 schedule members with a score past ARGV[3]};
-- or, when the stored format is newer than ARGV[4], {'format', the format recorded}, and
-- nothing written: the beat stops.
local layout = redis.pcall('HMGET', KEYS[4], 'shards', 'moving_to', 'format')
local bad = key_error(layout, 4, 'hash')
if bad then
  return bad
end
local refusal = format_refused(4, layout[3], ARGV[4])
if refusal then
  return refusal
end
local now = now_ms()
local housekeeping = ARGV[5] == '1'
-- Refused before writing anything else when the key has another type: no probe needed.
if housekeeping then
  bad = key_error(
    redis.pcall('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - tonumber(ARGV[2])), 1, 'zset')
  if bad then
    return bad
  end
end
local version = redis.pcall('HGET', KEYS[2], 'version')
bad = key_error(version, 2, 'hash')
if bad then
  return bad
end
local beyond = {}
if housekeeping then
  beyond = redis.pcall('ZRANGEBYSCORE', KEYS[3], '(' .. ARGV[3], '+inf', 'WITHSCORES',
                       'LIMIT', 0, 10)
  bad = key_error(beyond, 3, 'zset')
  if bad then
    return bad
  end
end
local added = redis.pcall('ZADD', KEYS[1], now, ARGV[1])
bad = key_error(added, 1, 'zset')
if bad then
  return bad
end
local out = {now, added, version or '', layout[1] or '', layout[2] or ''}
for _, value in ipairs(beyond) do
  out[#out + 1] = value
end
return out
