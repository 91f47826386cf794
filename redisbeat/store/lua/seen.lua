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
