#!lua flags=no-writes
-- The replay of a request that a local gate refused (closed, outside the window, sold out, rate
-- limited: service/admission.h) and that carries an Idempotency-Key: what the key's first request
-- left, its order as the order's record is now, or nothing when the key is not known here (never
-- seen, expired, or its first request was refused: a refusal is not kept). Reads what the
-- reserve, draw and enqueue scripts write under the key (sale_reserve.lua, lottery_draw.lua,
-- lottery_enqueue.lua) and answers as their replays do; decides nothing, writes nothing.
-- KEYS: meta stock items prizes orders idem
-- ARGV: user_id quantity
-- RETURNS: {found:int [code:int remaining:int count:int order_id:str detail:str]}
-- Returns {0} the key is not known here (or the activity is not loaded); {1, code, remaining,
-- count, order_id, detail}: the first request's outcome, a sale's order as it is now (code 1
-- reserved, -10 cancelled, -11 refused; count its units, 0 when not known; detail its items) or
-- a draw's (code 1 won, 2 no prize, -11 refused, -10 released; count the user's draws then;
-- detail the prize id), or a refusal a previous version kept (its code; count: units held or
-- draws), or -6 when the order is another user's, or -12 when a sale's key was kept with
-- another quantity than `quantity` (another request under a used key); {2, 0, 0, 0, ticket_id,
-- ''}: a queued draw's ticket.
local kind = redis.call('HGET', KEYS[1], 'kind')
local first = kind and redis.call('GET', KEYS[6])
if not first then return {0} end
if string.sub(first, 1, 2) == 'T|' then return {2, 0, 0, 0, string.sub(first, 3), ''} end
-- "code|count|order_id[|...]": a sale's (count: units held; then the order's units) or a draw's
-- (count: draws; then the user).
local code, count, order_id, rest = string.match(first, '^(-?%d+)|(%d+)|([^|]*)|?(.*)$')
if not code then return {0} end
code, count = tonumber(code), tonumber(count)
local lottery = kind == 'lottery'
if not lottery and code == 1 and string.find(rest, '^%d+$') and rest ~= ARGV[2] then
  return {1, -12, 0, 0, '', ''}
end
local remaining = 0
if kind == 'counted' then
  remaining = tonumber(redis.call('GET', KEYS[2]) or '0')
elseif kind == 'items' then
  remaining = redis.call('LLEN', KEYS[3])
else
  for _, left in ipairs(redis.call('HVALS', KEYS[4])) do remaining = remaining + tonumber(left) end
end
local record = (code == 1 or (lottery and code == 2)) and redis.call('HGET', KEYS[5], order_id)
if not record then
  -- A refusal a previous version kept, or an order whose record is gone: as the key says (a
  -- sale's units: the fourth field, when the key has it).
  if code == 1 and not lottery then count = tonumber(string.match(rest, '^(%d+)') or '0') end
  return {1, code, remaining, count, order_id, ''}
end
local state, who, units, detail = string.match(record, '^(%a)|([^|]*)|(%d+)|%d+|(.*)$')
if who ~= ARGV[1] then return {1, -6, 0, 0, '', ''} end
if state == 'N' then return {1, 2, remaining, count, order_id, ''} end
code = (state == 'R' and 1) or (state == 'F' and -11) or -10
return {1, code, remaining, lottery and count or tonumber(units), order_id, detail}
