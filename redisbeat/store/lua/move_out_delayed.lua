-- Take delayed tasks out of this shard for a reshard, as move_out.lua takes entries: each
-- one's records (its JSON record, due time, set-aside record, owner and the due time in its
-- owner's index) are kept in the shard's delayed moving hash until move_in_delayed.lua has
-- written them where the new count puts them. A task out of the delayed schedule is claimed
-- by no beat; one a beat holds stays until the beat has finished it.
--
-- KEYS[1] = delayed            ZSET  key -> due ms (a held task's: its lease)
-- KEYS[2] = delayed tasks      HASH  key -> JSON {task, args, kwargs, options, owner}
-- KEYS[3] = delayed inflight   HASH  only read: whether a beat holds the task
-- KEYS[4] = delayed quarantine HASH
-- KEYS[5] = delayed moving     HASH  key -> JSON of its records
-- KEYS[6] = the shard's layout HASH
-- ARGV[1] = the layout the mover follows ('4>8')
-- ARGV[2] = the start of an owner index's key (the owner follows; same hash tag)
-- ARGV[3..] = task keys
-- Returns -2 when the layout changed, else per key: the JSON of its records (also when an
-- earlier, interrupted move took it out), 1 when a beat holds it (move it later), 0 when
-- this shard holds nothing of it.
local refusal = refused(6, ARGV[1], {'zset', 'hash', 'hash', 'hash', 'hash'})
if refusal then
  return refusal
end
-- The owner named by the task's record, or by the record set aside.
local function owner_of(definition, quarantine)
  local task = record(definition or nil)
  if not task then
    local aside = record(quarantine or nil)
    task = aside and type(aside.definition) == 'string' and record(aside.definition) or nil
  end
  if task and type(task.owner) == 'string' and task.owner ~= '' then
    return task.owner
  end
  return nil
end
local out = {}
for i = 3, #ARGV do
  local key = ARGV[i]
  local taken = redis.call('HGET', KEYS[5], key)
  local score = redis.call('ZSCORE', KEYS[1], key)
  local claim = record(redis.call('HGET', KEYS[3], key))
  if taken then
    out[#out + 1] = taken
  elseif score and claim and tonumber(claim.lease_until) == tonumber(score) then
    out[#out + 1] = 1
  else
    local definition = redis.call('HGET', KEYS[2], key)
    local quarantine = redis.call('HGET', KEYS[4], key)
    if not (definition or score or quarantine) then
      out[#out + 1] = 0
    else
      local owner = owner_of(definition, quarantine)
      local records = {definition = definition or nil, score = score or nil,
                       quarantine = quarantine or nil, owner = owner}
      if owner then
        records.owner_score = redis.call('ZSCORE', ARGV[2] .. owner, key) or nil
        redis.call('ZREM', ARGV[2] .. owner, key)
      end
      taken = cjson.encode(records)
      redis.call('HSET', KEYS[5], key, taken)
      redis.call('HDEL', KEYS[2], key)
      redis.call('ZREM', KEYS[1], key)
      redis.call('HDEL', KEYS[4], key)
      out[#out + 1] = taken
    end
  end
end
return out
