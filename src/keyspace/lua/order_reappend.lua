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
-- The packed intent (as sale_reserve.lua writes it) without the limit it was sold under,
-- which the record does not keep: the consumer takes the activity's limit as it is now.
redis.call('XADD', KEYS[2], '*', 'o', ARGV[1] .. '|' .. user .. '|' .. qty .. '|' .. ts .. '|||'
  .. items)
return 1
