-- Releases the migration lock taken by migration_lock.sql.
SELECT pg_advisory_unlock(%(lock)s)
