-- Set aside a beat_schedule item that makes no entry, leaving alone what is stored under its
-- name (an earlier definition keeps running); or forget that record, once the item is gone
-- from beat_schedule. A record is written again only when the item or the error changed, so
-- that beats restarting with the same configuration do not report it anew.
--
-- KEYS[1] = quarantine  HASH  name -> {"definition", "error", "at", "by", "item": true}
-- KEYS[2] = the shard's layout HASH
-- ARGV[1] = name
-- ARGV[2] = the item, as far as it can be shown ('' to forget its record)
-- ARGV[3] = the error
-- ARGV[4] = the beat that found it
-- ARGV[5] = the layout the writer followed ('4', or '4>8' during a reshard)
-- Returns 1 when recorded (or forgotten), 0 when the same item and error were recorded
--         already (or there is no item's record to forget), -2 when the layout changed.
local refusal = refused(2, ARGV[5], {'hash'})
if refusal then
  return refusal
end
local old = record(redis.call('HGET', KEYS[1], ARGV[1]))
if ARGV[2] == '' then
  -- Only an item's record: a definition set aside by a beat stays until written or removed.
  if old and old.item == true then
    return redis.call('HDEL', KEYS[1], ARGV[1])
  end
  return 0
end
if old and old.item == true and old.definition == ARGV[2] and old.error == ARGV[3] then
  return 0
end
redis.call('HSET', KEYS[1], ARGV[1], cjson.encode(
  {definition = ARGV[2], error = ARGV[3], at = now_ms(), by = ARGV[4], item = true}))
return 1
