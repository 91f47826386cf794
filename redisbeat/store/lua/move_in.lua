-- Write entries a reshard took out of their old shard (move_out.lua) into this one, their
-- new shard, as they were: definition, due time, run state, a set-aside record, owner.
-- An entry already here (an editor wrote it meanwhile) or moved here before in this reshard
-- (a move repeated after an interruption) is left as it is: a later write is never undone.
--
-- KEYS[1] = entries     HASH     KEYS[4] = quarantine  HASH
-- KEYS[2] = schedule    ZSET     KEYS[5] = arrived     HASH  name -> 1, for this reshard
-- KEYS[3] = state       HASH     KEYS[6] = the shard's layout HASH
-- KEYS[7..] = the owners' SETs of names
-- ARGV[1] = the layout the mover follows ('4>8')
-- ARGV[2] = pub/sub channel: the beats look at every shard again
-- ARGV[3..] = name, the JSON move_out.lua returned, the index in KEYS of its owner's SET
-- Returns -2 when the layout changed, else per name 1 (written) or 0 (left as it was).
local refusal = refused(6, ARGV[1], {'hash', 'zset', 'hash', 'hash', 'hash'})
if refusal then
  return refusal
end
local out, woken = {}, false
for i = 3, #ARGV, 3 do
  local name, records, owner = ARGV[i], cjson.decode(ARGV[i + 1]), tonumber(ARGV[i + 2])
  if redis.call('HEXISTS', KEYS[5], name) == 1 or redis.call('HEXISTS', KEYS[1], name) == 1
      or redis.call('HEXISTS', KEYS[4], name) == 1 then
    out[#out + 1] = 0
  else
    if records.definition then
      redis.call('HSET', KEYS[1], name, records.definition)
    end
    if records.score then
      redis.call('ZADD', KEYS[2], records.score, name)
      woken = true
    end
    if records.state then
      redis.call('HSET', KEYS[3], name, records.state)
    end
    if records.quarantine then
      redis.call('HSET', KEYS[4], name, records.quarantine)
    end
    if owner > 0 then
      redis.call('SADD', KEYS[owner], name)
    end
    redis.call('HSET', KEYS[5], name, 1)
    out[#out + 1] = 1
  end
end
if woken then
  redis.pcall('PUBLISH', ARGV[2], 'moved')
end
return out
