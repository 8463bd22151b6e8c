-- Takes the migration lock if it is free, without waiting (migrate._lock polls:
-- a session waiting inside pg_advisory_lock would hold a snapshot that
-- CREATE INDEX CONCURRENTLY in the lock holder's session waits for).
SELECT pg_try_advisory_lock(%(lock)s) AS locked
