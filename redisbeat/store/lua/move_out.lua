-- Take entries out of this shard for a reshard: each one's records are kept, whole, in the
-- shard's moving hash until move_in.lua has written them where the new count puts them. An
-- entry out of its shard's schedule is claimed by no beat, so no occurrence is sent twice.
--
-- KEYS[1] = entries     HASH     KEYS[5] = quarantine  HASH
-- KEYS[2] = schedule    ZSET     KEYS[6] = moving      HASH  name -> JSON of its records
-- KEYS[3] = state       HASH     KEYS[7] = the shard's layout HASH
-- KEYS[4] = inflight    HASH     only read: a claimed entry stays until its beat finishes
-- ARGV[1] = the layout the mover follows ('4>8')
-- ARGV[2..] = names
-- Returns -2 when the layout changed (the reshard ended or another began), else per name:
-- the JSON of its records (also when an earlier, interrupted move took it out), 1 when it
-- is claimed (move it later), 0 when this shard holds nothing of it.
local refusal = refused(7, ARGV[1], {'hash', 'zset', 'hash', 'hash', 'hash', 'hash'})
if refusal then
  return refusal
end
local out = {}
for i = 2, #ARGV do
  local name = ARGV[i]
  local taken = redis.call('HGET', KEYS[6], name)
  if taken then
    out[#out + 1] = taken
  elseif redis.call('HEXISTS', KEYS[4], name) == 1 then
    out[#out + 1] = 1
  else
    local records = {
      definition = redis.call('HGET', KEYS[1], name) or nil,
      score = redis.call('ZSCORE', KEYS[2], name) or nil,
      state = redis.call('HGET', KEYS[3], name) or nil,
      quarantine = redis.call('HGET', KEYS[5], name) or nil,
    }
    if next(records) == nil then
      out[#out + 1] = 0
    else
      taken = cjson.encode(records)
      redis.call('HSET', KEYS[6], name, taken)
      redis.call('HDEL', KEYS[1], name)
      redis.call('ZREM', KEYS[2], name)
      redis.call('HDEL', KEYS[3], name)
      redis.call('HDEL', KEYS[5], name)
      out[#out + 1] = taken
    end
  end
end
return out
