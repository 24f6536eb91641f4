#!lua flags=no-writes
-- A queued draw's ticket, for its owner: pending, or the draw's outcome; a win as its record is
-- now (1 won, -11 refused: dead-lettered, -10 released).
-- KEYS: ticket orders
-- ARGV: user_id
-- RETURNS: {state:int [code:int draws:int order_id:str prize_id:str]}
-- Returns {-4} no such ticket (or not this user's, or expired), {0} pending, or
-- {1, code, draws, order_id, prize_id}.
local value = redis.call('GET', KEYS[1])
if not value then return {-4} end
if string.sub(value, 1, 2) == 'P|' then
  if string.sub(value, 3) ~= ARGV[1] then return {-4} end
  return {0}
end
local code, draws, order_id, user = string.match(value, '^(-?%d+)|(%d+)|([^|]*)|(.*)$')
if not code or user ~= ARGV[1] then return {-4} end
local prize = ''
code = tonumber(code)
if code == 1 then
  local record = redis.call('HGET', KEYS[2], order_id)
  if record then
    local state, won = string.match(record, '^(%a)|[^|]*|%d+|%d+|(.*)$')
    prize = won or ''
    if state == 'F' then code = -11 elseif state == 'X' then code = -10 end
  end
end
return {1, code, tonumber(draws), order_id, prize}
