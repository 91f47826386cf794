-- Extend the lease of the claims a beat still holds (a batch that takes long to send).
-- A claim is renewed only while it is still this beat's under the lease it was given; its
-- schedule score moves with it only while the score still holds that lease, so an edit,
-- run-now or removal made meanwhile is kept (finish then leaves the score alone, as it
-- would have without the renewal).
--
-- KEYS[1] = schedule  ZSET
-- KEYS[2] = inflight  HASH  name -> {"due", "at", "beat", "lease_until"}
-- ARGV[1] = beat id
-- ARGV[2] = the lease_until the claims hold now, ms
-- ARGV[3] = lease, ms (the new lease runs from now, by the Redis clock)
-- ARGV[4...] = names
-- Returns {new lease_until ms, how many claims were renewed}.
local bad = wrong_type({'zset', 'hash'})
if bad then
  return bad
end
local now = now_ms()
local beat, old = ARGV[1], tonumber(ARGV[2])
local lease_until = now + tonumber(ARGV[3])
local renewed = 0
for i = 4, #ARGV do
  local name = ARGV[i]
  local claim = record(redis.call('HGET', KEYS[2], name))
  if claim and claim.beat == beat
      and tonumber(claim.lease_until) == old then
    if tonumber(redis.call('ZSCORE', KEYS[1], name)) == old then
      redis.call('ZADD', KEYS[1], lease_until, name)
    end
    claim.lease_until = lease_until
    redis.call('HSET', KEYS[2], name, cjson.encode(claim))
    renewed = renewed + 1
  end
end
return {lease_until, renewed}
