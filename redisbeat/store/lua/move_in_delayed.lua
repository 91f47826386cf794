-- Write delayed tasks a reshard took out of their old shard (move_out_delayed.lua) into this
-- one, their new shard, as they were: record, due time, set-aside record, and the due time
-- in the owner's index. A task already here (a delay written in its new shard meanwhile
-- replaced it) or moved here before in this reshard (a move repeated after an interruption)
-- is left as it is: a later write is never undone.
--
-- KEYS[1] = delayed            ZSET
-- KEYS[2] = delayed tasks      HASH
-- KEYS[3] = delayed quarantine HASH
-- KEYS[4] = delayed arrived    HASH  key -> 1, for this reshard
-- KEYS[5] = the shard's layout HASH
-- ARGV[1] = the layout the mover follows ('4>8')
-- ARGV[2] = the start of an owner index's key (the owner follows; same hash tag)
-- ARGV[3] = pub/sub channel: the beats look at every shard again
-- ARGV[4..] = key, the JSON move_out_delayed.lua returned
-- Returns -2 when the layout changed, else per key 1 (written) or 0 (left as it was).
local refusal = refused(5, ARGV[1], {'zset', 'hash', 'hash', 'hash'})
if refusal then
  return refusal
end
local out, woken = {}, false
for i = 4, #ARGV, 2 do
  local key, records = ARGV[i], cjson.decode(ARGV[i + 1])
  if redis.call('HEXISTS', KEYS[4], key) == 1 or redis.call('HEXISTS', KEYS[2], key) == 1
      or redis.call('ZSCORE', KEYS[1], key) or redis.call('HEXISTS', KEYS[3], key) == 1 then
    out[#out + 1] = 0
  else
    if records.definition then
      redis.call('HSET', KEYS[2], key, records.definition)
    end
    if records.score then
      redis.call('ZADD', KEYS[1], records.score, key)
      woken = true
    end
    if records.quarantine then
      redis.call('HSET', KEYS[3], key, records.quarantine)
    end
    if type(records.owner) == 'string' and records.owner_score then
      redis.call('ZADD', ARGV[2] .. records.owner, records.owner_score, key)
    end
    redis.call('HSET', KEYS[4], key, 1)
    out[#out + 1] = 1
  end
end
if woken then
  redis.pcall('PUBLISH', ARGV[3], 'moved')
end
return out
