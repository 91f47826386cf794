-- Write entries a reshard took out of their old shard (move_out.lua) into this one, their
-- new shard, as they were: definition, due time, run state, set-aside record, owner,
-- running marker, spent time, history (newest first, after anything pushed here since) and
-- the workers' mark of its last send (unless one of that send's copies was marked here).
-- An entry already here (an editor wrote it meanwhile) or moved here before in this reshard
-- (a move repeated after an interruption) is left as it is: a later write is never undone.
-- An entry whose history an editor's move left behind (arrived 'h') takes it when it comes.
--
-- KEYS[1] = entries     HASH     KEYS[5] = arrived     HASH  name -> 1 (or 'h'), this reshard
-- KEYS[2] = schedule    ZSET     KEYS[6] = the shard's layout HASH
-- KEYS[3] = state       HASH     KEYS[7] = running     HASH
-- KEYS[4] = quarantine  HASH     KEYS[8] = spent       ZSET
-- KEYS[9..] = the owners' SETs of names, and the history LISTs of entries that bring one
-- ARGV[1] = the layout the mover follows ('4>8')
-- ARGV[2] = pub/sub channel: the beats look at every shard again
-- ARGV[3..] = name, the JSON move_out.lua returned, the index in KEYS of its owner's SET
--             (0: none), the index in KEYS of its history LIST (0: it brings none), the
--             index in KEYS of its last send's mark (0: it brings none), in fives
-- Returns -2 when the layout changed, else per name 1 (written) or 0 (left as it was).
local refusal = refused(6, ARGV[1], {'hash', 'zset', 'hash', 'hash', 'hash', 'hash', 'hash', 'zset'})
if refusal then
  return refusal
end
-- The moved history goes after what this shard holds: anything pushed here is newer. A key
-- of another type there is not a history, and keeps what it holds; any other refusal (an
-- ACL without RPUSH) fails the move before anything of the entry is written.
local function append_history(records, index)
  if records.history and index > 0 then
    for first = 1, #records.history, CHUNK do
      local reply = redis.pcall('RPUSH', KEYS[index], chunk(records.history, first))
      if type(reply) == 'table' and reply.err then
        if string.sub(reply.err, 1, 9) == 'WRONGTYPE' then
          return
        end
        error(reply)
      end
    end
  end
end
local function write(name, records, owner, history)
  append_history(records, history)
  if records.definition then
    redis.call('HSET', KEYS[1], name, records.definition)
  end
  local woken = false
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
  if records.running and redis.call('HEXISTS', KEYS[7], name) == 0 then
    redis.call('HSET', KEYS[7], name, records.running)
  end
  if records.spent then
    redis.call('ZADD', KEYS[8], 'NX', records.spent, name)
  end
  if owner > 0 then
    redis.call('SADD', KEYS[owner], name)
  end
  return woken
end
-- The mark lasts as long as it had left: a copy of that send is still a copy here.
local function put_mark(records, index)
  local seen = records.seen
  local ttl = index > 0 and type(seen) == 'table' and tonumber(seen.expires)
  ttl = ttl and ttl - now_ms()
  if ttl and ttl > 0 and type(seen.mark) == 'string' then
    redis.call('SET', KEYS[index], seen.mark, 'PX', ttl, 'NX')
  end
end
local out, woken = {}, false
for i = 3, #ARGV, 5 do
  local name, records = ARGV[i], cjson.decode(ARGV[i + 1])
  local owner, history = tonumber(ARGV[i + 2]), tonumber(ARGV[i + 3])
  put_mark(records, tonumber(ARGV[i + 4]))
  local arrived = redis.call('HGET', KEYS[5], name)
  if arrived == 'h' and not records.history_left then
    append_history(records, history)
    redis.call('HSET', KEYS[5], name, 1)
    out[#out + 1] = 1
  elseif arrived or redis.call('HEXISTS', KEYS[1], name) == 1
      or redis.call('HEXISTS', KEYS[4], name) == 1 then
    out[#out + 1] = 0
  else
    woken = write(name, records, owner, history) or woken
    redis.call('HSET', KEYS[5], name, records.history_left and 'h' or 1)
    out[#out + 1] = 1
  end
end
if woken then
  redis.pcall('PUBLISH', ARGV[2], 'moved')
end
return out
