#!lua
-- Admits a draw to a lottery's admission queue (S3-3): the entry holds only the ticket, the user
-- and the time; consumers run the draw script for it. The ticket (an idempotency key of the draw
-- script) holds "P|user" until the draw decides it. The queue is capped: beyond `capacity`
-- waiting entries the caller is told to come back, instead of the queue growing without bound.
-- A user holds at most as many pending tickets as draws left to them (the per-user limit less
-- the draws made): `pending` (a sorted set per user, under an HMAC token of the user) holds the
-- user's ticket ids scored by their expiry; a ticket no longer "P|" (drawn, or expired) leaves
-- it here, so the set never holds more than the limit and needs no cleanup elsewhere.
-- Every key it touches comes in KEYS: `tickets` are the ticket keys of the user's pending tickets
-- as the caller read them from `pending` (ZRANGE) just before the call; a ticket added to
-- `pending` since (by a concurrent request of the same user) has no key here and is counted as
-- pending, never read.
-- KEYS: meta queue ticket idem buyers pending tickets...
-- ARGV: ticket_id user_id now_ms capacity ticket_ttl_ms idem_ttl_ms
-- RETURNS: {code:int ticket_id:str [draws:int]}
-- Returns {1, ticket_id} queued, {2, ticket_id} an earlier request with the same idempotency key
-- was queued under that ticket, {0, '', draws} no draw left to the user (draws made plus
-- tickets pending reach the limit; draws = draws made), {-8, ''} the queue is full,
-- {-4, ''} no such lottery.
local idem_ttl = tonumber(ARGV[6])
if idem_ttl > 0 then
  local first = redis.call('GET', KEYS[4])
  if first then return {2, string.sub(first, 3)} end
end
local m = redis.call('HMGET', KEYS[1], 'kind', 'limit')
if m[1] ~= 'lottery' then return {-4, ''} end
local now, ttl = tonumber(ARGV[3]), tonumber(ARGV[5])
-- The user's tickets still pending: the ticket keys share this one's prefix; each one's key is
-- looked up among those given.
local ticket_prefix = string.sub(KEYS[3], 1, #KEYS[3] - #ARGV[1])
local given = {}
for i = 7, #KEYS do given[KEYS[i]] = i end
redis.call('ZREMRANGEBYSCORE', KEYS[6], '-inf', now)
for _, id in ipairs(redis.call('ZRANGE', KEYS[6], 0, -1)) do
  local at = given[ticket_prefix .. id]
  if at then
    local state = redis.call('GET', KEYS[at])
    if not state or string.sub(state, 1, 2) ~= 'P|' then redis.call('ZREM', KEYS[6], id) end
  end
end
local draws = tonumber(redis.call('HGET', KEYS[5], ARGV[2]) or '0')
if draws + redis.call('ZCARD', KEYS[6]) >= tonumber(m[2] or '0') then return {0, '', draws} end
if redis.call('XLEN', KEYS[2]) >= tonumber(ARGV[4]) then return {-8, ''} end
redis.call('SET', KEYS[3], 'P|' .. ARGV[2], 'PX', ARGV[5])
redis.call('ZADD', KEYS[6], now + ttl, ARGV[1])
redis.call('PEXPIRE', KEYS[6], ttl)
redis.call('XADD', KEYS[2], '*', 'ticket', ARGV[1], 'user_id', ARGV[2], 'ts', ARGV[3])
if idem_ttl > 0 then redis.call('SET', KEYS[4], 'T|' .. ARGV[1], 'PX', idem_ttl) end
return {1, ARGV[1]}
