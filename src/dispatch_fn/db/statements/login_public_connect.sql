-- REVOKE by a role that does not own the database warns instead of failing.
SELECT has_database_privilege('public', current_database(), 'CONNECT') AS public_connects
