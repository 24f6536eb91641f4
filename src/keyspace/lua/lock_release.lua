#!lua
-- Releases a lock only for its holder (compare the token, then delete): a worker whose lease ran
-- out never deletes the lock someone else holds now (S0-5).
-- KEYS: lock
-- ARGV: token
-- RETURNS: released:int
-- Returns 1 released, 0 not held by this token.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
return redis.call('DEL', KEYS[1])
