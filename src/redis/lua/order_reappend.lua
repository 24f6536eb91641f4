#!lua
-- Reconciliation's repair of a lost order intent: an order Redis recorded as reserved whose intent
-- is in neither the stream nor the database (lost with a trimmed or rebuilt stream) is appended
-- again, rebuilt from its record. Only while the record is still R: a released order is not
-- re-sold. The database's order id key makes a duplicate harmless.
-- KEYS: orders stream
-- ARGV: order_id
-- RETURNS: appended:int
-- Returns 1 appended | 0 not reserved (released, or no record)
local rec = redis.call('HGET', KEYS[1], ARGV[1])
if not rec then return 0 end
local state, user, qty, ts, items = string.match(rec, '^(%a)|([^|]*)|(%d+)|(%d+)|(.*)$')
if state ~= 'R' then return 0 end
redis.call('XADD', KEYS[2], '*', 'order_id', ARGV[1], 'user_id', user, 'quantity', qty,
  'items', items, 'ts', ts)
return 1
