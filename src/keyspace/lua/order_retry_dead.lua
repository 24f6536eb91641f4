#!lua
-- Puts a dead-lettered order intent back on the activity's stream (as a new entry, for the
-- consumers to try again) and removes it from the dead-letter stream, in one step. Writing the
-- order again is safe: the database insert is idempotent on the order id. Refused when the
-- order's units went back to stock as it was dead-lettered (its record is F): written now, it
-- would be a sale of units that are on sale again; the dead letter stays.
-- KEYS: dead stream orders
-- ARGV: dead_id
-- RETURNS: {code:int entry_id:str}
-- Returns {1, new entry id} put back | {0, ''} no such dead letter | {-1, ''} refused: the
-- order's units were returned to stock when it was dead-lettered
local entry = redis.call('XRANGE', KEYS[1], ARGV[1], ARGV[1])
if #entry == 0 then return {0, ''} end
local fields, intent, order_id = entry[1][2], {}, nil
for i = 1, #fields, 2 do
  local name = fields[i]
  -- The packed intent ("order_id|user_id|..."), or the named fields older versions wrote.
  if name == 'o' then order_id = string.match(fields[i + 1], '^([^|]*)|') end
  if name == 'order_id' then order_id = fields[i + 1] end
  if name ~= 'original_id' and name ~= 'error' and name ~= 'deliveries' and name ~= 'dead_ms' then
    intent[#intent + 1] = name
    intent[#intent + 1] = fields[i + 1]
  end
end
if order_id then
  local rec = redis.call('HGET', KEYS[3], order_id)
  if rec and string.sub(rec, 1, 2) == 'F|' then return {-1, ''} end
end
local id = redis.call('XADD', KEYS[2], '*', unpack(intent))
redis.call('XDEL', KEYS[1], ARGV[1])
return {1, id}
