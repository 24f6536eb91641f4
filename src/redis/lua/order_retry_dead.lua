#!lua
-- Puts a dead-lettered order intent back on the activity's stream (as a new entry, for the
-- consumers to try again) and removes it from the dead-letter stream, in one step. Writing the
-- order again is safe: the database insert is idempotent on the order id.
-- KEYS: dead stream
-- ARGV: dead_id
-- RETURNS: entry_id:str|nil
-- Returns the new entry id | false when there is no such dead letter
local entry = redis.call('XRANGE', KEYS[1], ARGV[1], ARGV[1])
if #entry == 0 then return false end
local fields, intent = entry[1][2], {}
for i = 1, #fields, 2 do
  local name = fields[i]
  if name ~= 'original_id' and name ~= 'error' and name ~= 'deliveries' and name ~= 'dead_ms' then
    intent[#intent + 1] = name
    intent[#intent + 1] = fields[i + 1]
  end
end
local id = redis.call('XADD', KEYS[2], '*', unpack(intent))
redis.call('XDEL', KEYS[1], ARGV[1])
return id
