-- This database's dispatcher role (migration 0009), the one its login joins.
SELECT duly_dispatcher_role() AS role
