-- The role the dispatcher runs as: exactly what a run needs, nothing else.
--
-- The role that applies migrations owns the tables; the dispatcher logs in as
-- a member of duly_dispatcher (the stack's migration step creates that login,
-- docs/deploy.md) and can therefore only:
--   read duties, and move last_dispatched_period (never a duty's other columns);
--   read tasks and insert new ones (never update or delete one: SPEC §3);
--   read, start and finish its own run ledger rows (duly_dispatch_run).
-- It owns nothing and is granted nothing on the schema, so it cannot create,
-- alter or drop a table. On PostgreSQL 15 and later PUBLIC has no CREATE on
-- the public schema; on older servers revoke it (docs/deploy.md).
--
-- The insert into duly_task needs no grant on its identity sequence:
-- PostgreSQL draws an identity column's default with the table's own rights.
-- That is tested (tests/database/test_roles.py), not assumed.
--
-- A role belongs to the whole cluster, so it may exist already (another
-- database on the same cluster, or a concurrent migration racing this one).
DO $$
BEGIN
    CREATE ROLE duly_dispatcher NOLOGIN;
EXCEPTION
    WHEN duplicate_object OR unique_violation THEN
        NULL;
END
$$;

GRANT SELECT ON duly_duty TO duly_dispatcher;
GRANT UPDATE (last_dispatched_period) ON duly_duty TO duly_dispatcher;
GRANT SELECT, INSERT ON duly_task TO duly_dispatcher;

-- The run ledger arrives in migration 0004; granted only where it exists, so
-- this file applies unchanged before and after it.
DO $$
BEGIN
    IF to_regclass('duly_dispatch_run') IS NOT NULL THEN
        GRANT SELECT, INSERT, UPDATE ON duly_dispatch_run TO duly_dispatcher;
    END IF;
END
$$;
