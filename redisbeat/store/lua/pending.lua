-- One page of an owner's pending delayed tasks in this shard, in due order (ties by key).
-- While a reshard runs, the tasks it has set aside here to move (for moments) are in the
-- page too, so a listing never misses a task on its way.
--
-- KEYS[1] = the owner's index ZSET  key -> due ms
-- KEYS[2] = delayed tasks            HASH
-- KEYS[3] = delayed                  ZSET
-- KEYS[4] = delayed inflight         HASH
-- KEYS[5] = delayed moving           HASH  key -> JSON of its records, while it moves
-- ARGV[1] = the due ms of the last task of the previous page ('-inf' for the first page)
-- ARGV[2] = its key (the page starts after it)
-- ARGV[3] = how many at most
-- ARGV[4] = '1': a reshard runs (read KEYS[5] too)
-- ARGV[5] = the owner ('' for every task: KEYS[1] is the delayed schedule)
-- Returns {key, due ms, record, 1 if a beat is sending it else 0, ...}.
local bad = wrong_type({'zset', 'hash', 'zset', 'hash'})
if bad then
  return bad
end
local after_score, after_key = tonumber(ARGV[1]), ARGV[2]
local limit = tonumber(ARGV[3])
local function after(score, key)
  return after_score == nil or score > after_score or (score == after_score and key > after_key)
end
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
local rows = {}
if #keys > 0 then
  local records = redis.call('HMGET', KEYS[2], unpack(keys))
  for i, key in ipairs(keys) do
    local sending = 0
    local claim = record(redis.call('HGET', KEYS[4], key))
    if claim and tonumber(claim.lease_until) == tonumber(redis.call('ZSCORE', KEYS[3], key)) then
      sending = 1
    end
    rows[#rows + 1] = {key, dues[i], records[i], sending}
  end
end
if ARGV[4] == '1' then
  local moving = redis.call('HGETALL', KEYS[5])
  local owner = ARGV[5]
  for i = 1, #moving, 2 do
    local moved = record(moving[i + 1])
    local due = nil
    if moved and owner == '' then
      due = tonumber(moved.score)
    elseif moved and moved.owner == owner then
      due = tonumber(moved.owner_score)
    end
    if due and type(moved.definition) == 'string' and after(due, moving[i]) then
      rows[#rows + 1] = {moving[i], due, moved.definition, 0}
    end
  end
  table.sort(rows, function(a, b)
    return a[2] < b[2] or (a[2] == b[2] and a[1] < b[1])
  end)
end
local out = {}
for i = 1, math.min(#rows, limit) do
  for _, value in ipairs(rows[i]) do
    out[#out + 1] = value
  end
end
return out
