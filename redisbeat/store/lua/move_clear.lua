-- Forget entries a reshard has written into their new shard (move_in.lua): their records in
-- the old shard's moving hash, and their names in the old shard's owners' sets. The same for
-- delayed tasks (move_in_delayed.lua), on the delayed moving hash, without owners' sets.
--
-- KEYS[1] = moving  HASH  (or delayed moving)
-- KEYS[2..] = the owners' SETs of names
-- ARGV[1..] = name, the index in KEYS of its owner's SET (0: none)
-- Returns how many moving records were forgotten.
local bad = wrong_type({'hash'})
if bad then
  return bad
end
local forgotten = 0
for i = 1, #ARGV, 2 do
  forgotten = forgotten + redis.call('HDEL', KEYS[1], ARGV[i])
  local owner = tonumber(ARGV[i + 1])
  if owner > 0 then
    redis.call('SREM', KEYS[owner], ARGV[i])
  end
end
return forgotten
