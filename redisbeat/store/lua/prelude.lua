-- Put in front of every script by scripts.py: the key type check, the Redis clock and the
-- decoding of a record, spelled once.
-- The globals a send's scripts call per entry, as locals: a global is looked up by name
-- each time it is read.
local tonumber, tostring, type, ipairs, pairs = tonumber, tostring, type, ipairs, pairs
local pcall, unpack, string, math, redis, cjson = pcall, unpack, string, math, redis, cjson
-- wrong_type({'zset', 'hash', ...}) checks KEYS[1], KEYS[2], ... before the script touches
-- anything. A key holding another type gives one error naming the key, rather than a
-- WRONGTYPE halfway through the script's writes (Redis does not undo a script's earlier
-- writes). The probes are commands the scripts run anyway, so an ACL that lets redisbeat
-- work lets them run too. Any other error (an ACL denial, say) is returned as Redis gave it.
local PROBES = {zset = 'ZSCORE', hash = 'HEXISTS', set = 'SISMEMBER'}
-- The error for a reply a script got with redis.pcall on KEYS[i] (nil: no error); a script
-- whose first command on a key reads it, or is its only write, needs no probe.
local function key_error(reply, i, expected)
  if type(reply) == 'table' and reply.err then
    if string.sub(reply.err, 1, 9) == 'WRONGTYPE' then
      return redis.error_reply('WRONGTYPE redisbeat: key ' .. KEYS[i] .. ' is not a '
        .. expected)
    end
    return reply
  end
  return nil
end
local function wrong_type(types)
  for i, expected in ipairs(types) do
    local bad = key_error(redis.pcall(PROBES[expected], KEYS[i], ''), i, expected)
    if bad then
      return bad
    end
  end
  return nil
end
-- Lua's unpack() gives at most a few thousand values and a batch may be larger, so a command
-- over many fields or members takes them CHUNK at a time (even: pairs stay whole).
local CHUNK = 1000
local function chunk(args, first)
  return unpack(args, first, math.min(first + CHUNK - 1, #args))
end
-- One read (HMGET) of many fields of KEYS[i], the replies joined; or, as the second
-- value, the error reply, a wrong type named as wrong_type names it: the read is the type check.
local function read_many(command, i, expected, fields)
  local out = {}
  for first = 1, #fields, CHUNK do
    local reply = redis.pcall(command, KEYS[i], chunk(fields, first))
    local bad = key_error(reply, i, expected)
    if bad then
      return nil, bad
    elseif #fields <= CHUNK then
      return reply, nil
    end
    for j = 1, #reply do
      out[#out + 1] = reply[j]
    end
  end
  return out, nil
end
-- One write (HSET, HDEL, ZADD, ZREM) of many fields or members of KEYS[i]; none: no command.
local function write_many(command, i, args)
  for first = 1, #args, CHUNK do
    redis.call(command, KEYS[i], chunk(args, first))
  end
end
-- Whether the layout this shard records (KEYS[i], a hash) is not the writer's (ARGV, spelled
-- '4', or '4>8' while a reshard moves entries from 4 shards to 8): the writer followed a
-- layout a reshard has changed since, and must read it again rather than write where the
-- entry may no longer live. No record: the shard never took part in a reshard. The second
-- value is the error reply of a key of the wrong type.
local function layout_changed(i, believed)
  local fields = redis.pcall('HMGET', KEYS[i], 'shards', 'moving_to')
  local bad = key_error(fields, i, 'hash')
  if bad or not fields[1] then
    return false, bad
  end
  local spelled = fields[1]
  if fields[2] then
    spelled = spelled .. '>' .. fields[2]
  end
  return spelled ~= believed, nil
end
-- A write script's checks before it touches anything: the shard's layout (KEYS[i]) against
-- the writer's, then the types of KEYS[1], KEYS[2], ...: an error reply, -2 when the
-- layout changed, or nil to go on.
local function refused(i, believed, types)
  local changed, bad = layout_changed(i, believed)
  bad = bad or wrong_type(types)
  if bad then
    return bad
  end
  return changed and -2 or nil
end
-- The Redis clock, ms: the one clock every beat shares.
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
-- The pause a run state holds, as upsert.lua's writer spells what it read: '' none (or one
-- that is over), '-' until resumed, else until when (ms).
local function pause_token(raw, now)
  local ok, state = pcall(cjson.decode, raw or '{}')
  if not ok or type(state) ~= 'table' or type(state.paused) ~= 'table' then
    return ''
  end
  local till = tonumber(state.paused['until'])
  if till == nil then
    return '-'
  end
  return till <= now and '' or string.format('%d', till)
end
-- A JSON object a script wrote (a claim record), or nil when it is missing or not one.
local function record(raw)
  if not raw then
    return nil
  end
  local ok, value = pcall(cjson.decode, raw)
  if ok and type(value) == 'table' then
    return value
  end
  return nil
end
-- The stored format's check (store/formats.py), before a script writes anything: nil when
-- this process reads the format the layout record KEYS[i] holds (``recorded``, as read from
-- its 'format' field: false when there is none, and then ``newest`` is recorded, the newest
-- this process reads), else the reply that refuses it: {'format', recorded}.
local function format_refused(i, recorded, newest)
  if not recorded then
    redis.call('HSET', KEYS[i], 'format', newest)
    return nil
  end
  if string.match(recorded, '^%d+$') and tonumber(recorded) <= tonumber(newest) then
    return nil
  end
  return {'format', recorded}
end
