-- One page of an owner's pending delayed tasks in this shard, in due order (ties by key).
--
-- KEYS[1] = the owner's index ZSET  key -> due ms
-- KEYS[2] = delayed tasks            HASH
-- KEYS[3] = delayed                  ZSET
-- KEYS[4] = delayed inflight         HASH
-- ARGV[1] = the due ms of the last task of the previous page ('-inf' for the first page)
-- ARGV[2] = its key (the page starts after it)
-- ARGV[3] = how many at most
-- Returns {key, due ms, record, 1 if a beat is sending it else 0, ...}.
local bad = wrong_type({'zset', 'hash', 'zset', 'hash'})
if bad then
  return bad
end
local after_score, after_key = tonumber(ARGV[1]), ARGV[2]
local limit = tonumber(ARGV[3])
local keys, dues = {}, {}
local offset = 0
while #keys < limit do
  local page = redis.call('ZRANGEBYSCORE', KEYS[1], ARGV[1], '+inf', 'WITHSCORES',
                          'LIMIT', offset, limit)
  if #page == 0 then
    break
  end
  for i = 1, #page, 2 do
    local score = tonumber(page[i + 1])
    if #keys < limit and (score ~= after_score or page[i] > after_key) then
      keys[#keys + 1] = page[i]
      dues[#dues + 1] = score
    end
  end
  offset = offset + #page / 2
end
local out = {}
if #keys == 0 then
  return out
end
local records = redis.call('HMGET', KEYS[2], unpack(keys))
for i, key in ipairs(keys) do
  local sending = 0
  local claim = record(redis.call('HGET', KEYS[4], key))
  if claim and tonumber(claim.lease_until) == tonumber(redis.call('ZSCORE', KEYS[3], key)) then
    sending = 1
  end
  out[#out + 1] = key
  out[#out + 1] = dues[i]
  out[#out + 1] = records[i]
  out[#out + 1] = sending
end
return out
