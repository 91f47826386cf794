-- What has become of claims a beat took ahead of their due time, read when they fall due:
-- a claim the beat may still send has its schedule score at the beat's lease and its
-- definition as it was claimed. An edit, disable, removal or run-now made meanwhile changed
-- one or the other, and the change decides: the beat hands such a claim back.
-- Read on the shard's own server, after every write it acknowledged before this call,
-- whether or not the beat heard its wake-up yet.
--
-- KEYS[1] = schedule  ZSET
-- KEYS[2] = entries   HASH
-- ARGV[1...] = names
-- Returns {now_ms, score or false, definition or false, score, definition, ...}.
local scores, bad = read_many('ZMSCORE', 1, 'zset', ARGV)
if bad then
  return bad
end
local definitions
definitions, bad = read_many('HMGET', 2, 'hash', ARGV)
if bad then
  return bad
end
local out = {now_ms()}
for i = 1, #ARGV do
  out[#out + 1] = scores[i]
  out[#out + 1] = definitions[i]
end
return out
