#!lua
-- Admits a draw to a lottery's admission queue (S3-3): the entry holds only the ticket, the user
-- and the time; consumers run the draw script for it. The ticket (an idempotency key of the draw
-- script) holds "P|user" until the draw decides it. The queue is capped: beyond `capacity`
-- waiting entries the caller is told to come back, instead of the queue growing without bound.
-- KEYS: meta queue ticket idem
-- ARGV: ticket_id user_id now_ms capacity ticket_ttl_ms idem_ttl_ms
-- RETURNS: {code:int ticket_id:str}
-- Returns {1, ticket_id} queued, {2, ticket_id} an earlier request with the same idempotency key
-- was queued under that ticket, {-8, ''} the queue is full, {-4, ''} no such lottery.
local idem_ttl = tonumber(ARGV[6])
if idem_ttl > 0 then
  local first = redis.call('GET', KEYS[4])
  if first then return {2, string.sub(first, 3)} end
end
if redis.call('HGET', KEYS[1], 'kind') ~= 'lottery' then return {-4, ''} end
if redis.call('XLEN', KEYS[2]) >= tonumber(ARGV[4]) then return {-8, ''} end
redis.call('SET', KEYS[3], 'P|' .. ARGV[2], 'PX', ARGV[5])
redis.call('XADD', KEYS[2], '*', 'ticket', ARGV[1], 'user_id', ARGV[2], 'ts', ARGV[3])
if idem_ttl > 0 then redis.call('SET', KEYS[4], 'T|' .. ARGV[1], 'PX', idem_ttl) end
return {1, ARGV[1]}
