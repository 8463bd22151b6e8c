-- Whether migration 0009 has given this database a dispatcher role of its own.
SELECT to_regprocedure('duly_dispatcher_role()') IS NOT NULL AS found
