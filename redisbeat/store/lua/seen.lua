-- The marks of the worker hook's duplicate check, spelled once for receive.lua and track.lua
-- (put after the prelude, before the script). A mark is one try of one task id, in the entry's
-- shard: {"stage": "received" | "started" | "ended", "tag", "worker", "at"}, expiring.
-- ``tag`` is the delivery tag of the message a worker received ('' when the broker's tags do
-- not last across redeliveries): a redelivery of that message is told apart from a copy.
local function mark_seen(i, stage, tag, worker, now, ttl)
  local mark = {stage = stage, tag = tag, worker = worker, at = now}
  redis.call('SET', KEYS[i], cjson.encode(mark), 'PX', ttl)
end
-- A run's start or end (ttl 0: the check is off). A start keeps the tag of its receipt.
local function mark_run(i, stage, worker, now, ttl)
  if ttl <= 0 then
    return
  end
  local tag = ''
  if stage == 'started' then
    local old = record(redis.call('GET', KEYS[i]))
    if old and type(old.tag) == 'string' then
      tag = old.tag
    end
  end
  mark_seen(i, stage, tag, worker, now, ttl)
end
-- Whether the layout this shard records (KEYS[i], a hash) is not the one the worker followed
-- (ARGV spelled '4', or '4>8' while a reshard runs), as the prelude's layout_changed says,
-- with HGET, which the worker's ACL grants: the worker reads the layout again rather than
-- write where the entry (or task) no longer lives. No record: the shard never took part in
-- a reshard.
local function worker_layout_changed(i, believed)
  local shards = redis.call('HGET', KEYS[i], 'shards')
  if not shards then
    return false
  end
  local moving_to = redis.call('HGET', KEYS[i], 'moving_to')
  if moving_to then
    shards = shards .. '>' .. moving_to
  end
  return shards ~= believed
end
