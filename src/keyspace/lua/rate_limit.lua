#!lua
-- GCRA rate limiting over one or more limiters at once (e.g. the user's and the client
-- address's): the request is allowed only if every limiter allows it, and only then does any
-- limiter advance. Each limiter key holds its theoretical arrival time (TAT) in ms.
-- KEYS: limiters...
-- ARGV: now_ms limits...
-- RETURNS: {allowed:int retry_after_ms:int}
-- limits: per limiter, two values: emission interval in ms (1000 / rate) and burst.
-- Returns {1, 0} allowed | {0, retry_after_ms} refused.
local now = tonumber(ARGV[1])
if not now or #ARGV ~= 1 + 2 * #KEYS then
  return redis.error_reply('ERR flashsale: rate_limit takes now_ms and two limits per key')
end
local new_tats, wait = {}, 0
for i = 1, #KEYS do
  local interval, burst = tonumber(ARGV[2 * i]), tonumber(ARGV[2 * i + 1])
  local tat = math.max(tonumber(redis.call('GET', KEYS[i]) or '0'), now)
  local new_tat = tat + interval
  local allow_at = new_tat - burst * interval
  if now < allow_at then wait = math.max(wait, allow_at - now) end
  new_tats[i] = new_tat
end
if wait > 0 then return {0, math.ceil(wait)} end
for i = 1, #KEYS do
  redis.call('SET', KEYS[i], string.format('%.3f', new_tats[i]), 'PX',
    math.ceil(new_tats[i] - now) + 1000)
end
return {1, 0}
