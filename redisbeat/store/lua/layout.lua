-- Read, record or change how the deployment's entries are split into shards.
-- The first process to touch a deployment records its count; every other follows the record.
-- A reshard records the count it moves the entries to ('begin'), then makes it the count
-- ('end'), once every entry is where that count puts it.
--
-- It also checks the deployment's stored format first (format_refused, in the prelude).
--
-- KEYS[1] = layout    HASH  shards -> the count, moving_to -> the count a reshard moves to,
--                           format -> the stored format's version
-- KEYS[2] = schedule  ZSET  shard 0's, only read: entries written before counts were recorded
-- ARGV[1] = 'read', 'begin' or 'end'
-- ARGV[2] = read: this process's count (recorded when none is); begin, end: the new count
-- ARGV[3] = the newest stored format this process reads (recorded when none is)
-- Returns {shards, moving_to or ''} as recorded after the call. A begin while a reshard to
-- another count runs, or an end of a reshard not running, changes nothing. A stored format
-- newer than ARGV[3]: {'format', the format recorded}, and nothing written.
local refusal = format_refused(1, redis.call('HGET', KEYS[1], 'format'), ARGV[3])
if refusal then
  return refusal
end
local shards = redis.call('HGET', KEYS[1], 'shards')
if not shards then
  shards = ARGV[1] == 'read' and ARGV[2] or '1'
  if shards ~= '1' and #redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', '+inf', 'LIMIT', 0, 1) > 0 then
    shards = '1' -- entries from before shards existed: all of them in shard 0
  end
  redis.call('HSET', KEYS[1], 'shards', shards)
end
local moving_to = redis.call('HGET', KEYS[1], 'moving_to')
if ARGV[1] == 'begin' and not moving_to and shards ~= ARGV[2] then
  moving_to = ARGV[2]
  redis.call('HSET', KEYS[1], 'moving_to', moving_to)
elseif ARGV[1] == 'end' and moving_to == ARGV[2] then
  shards, moving_to = moving_to, nil
  redis.call('HSET', KEYS[1], 'shards', shards)
  redis.call('HDEL', KEYS[1], 'moving_to')
end
return {shards, moving_to or ''}
