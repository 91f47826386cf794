-- Record which beat_schedule the deployment follows: compare-and-set on the version read.
--
-- KEYS[1] = config  HASH  version, at (ms), by (beat id), entries (JSON name -> digest),
--                         previous (JSON name -> digest of the configuration before; '' none),
--                         applied ('0' until the writer has written the entries, then '1')
-- ARGV[1] = 'claim' (write a new configuration) or 'applied' (its entries are written)
-- ARGV[2] = the version the writer read ('' = none)         | the version applied
-- ARGV[3] = the new version                                 |
-- ARGV[4] = beat id                                         |
-- ARGV[5] = entries JSON                                    |
-- ARGV[6] = previous entries JSON ('' = none: a full sync)  |
-- Returns 1 when written, 0 when another beat wrote the configuration first.
local bad = wrong_type({'hash'})
if bad then
  return bad
end
local current = redis.call('HGET', KEYS[1], 'version') or ''
if current ~= ARGV[2] then
  return 0
end
if ARGV[1] == 'applied' then
  redis.call('HSET', KEYS[1], 'applied', '1')
  return 1
end
local now = now_ms()
redis.call('HSET', KEYS[1], 'version', ARGV[3], 'at', now, 'by', ARGV[4], 'entries', ARGV[5],
           'previous', ARGV[6], 'applied', '0')
return 1
