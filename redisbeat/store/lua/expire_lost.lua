-- End now the leases of claims a beat made but never heard back about (the claim ran, its
-- reply was lost with the connection), so they are sent at once rather than when their
-- lease runs out. The beat knows only when it asked: its lost claims' leases end between
-- that time plus the lease and now plus the lease. The claim's record is kept, so the next
-- claimer sends the same occurrence (same due time, same task id).
--
-- KEYS[1] = schedule  ZSET
-- KEYS[2] = inflight  HASH  name -> {"due", "at", "beat", "lease_until"}
-- ARGV[1] = beat id
-- ARGV[2] = the earliest lease_until a lost claim can hold, ms
-- ARGV[3] = lease, ms
-- ARGV[4] = pub/sub channel, to wake the beats when a claim is handed back
-- Returns how many claims were handed back.
local bad = wrong_type({'zset', 'hash'})
if bad then
  return bad
end
local now = now_ms()
local candidates = redis.call('ZRANGEBYSCORE', KEYS[1], ARGV[2], now + tonumber(ARGV[3]),
                              'WITHSCORES')
local expired = 0
for i = 1, #candidates, 2 do
  local name, score = candidates[i], tonumber(candidates[i + 1])
  local claim = record(redis.call('HGET', KEYS[2], name))
  if claim and claim.beat == ARGV[1]
      and tonumber(claim.lease_until) == score then
    claim.lease_until = now
    redis.call('HSET', KEYS[2], name, cjson.encode(claim))
    redis.call('ZADD', KEYS[1], now, name)
    expired = expired + 1
  end
end
if expired > 0 then
  redis.pcall('PUBLISH', ARGV[4], 'released')
end
return expired
