-- The trigger's marks fall on the day the run judged (docs/contract.md#account,
-- docs/adr/0012), reproduced by a test first (tests/run/test_duty_accounts.py):
--
-- The trigger placed the latest scheduled clock on a local day with
-- PostgreSQL's AT TIME ZONE (duly_local_day, migration 0012), while every run
-- judges its clock's local day with the engine's pinned tz release (ADR 0001).
-- Where the two disagree a mark lands a day off, and a period is lost or one
-- that became owed while the duty was paused is created: the server reads
-- `CET` (a zone of the tz database) as the fixed abbreviation +01:00, a day
-- early in summer for clocks from 22:00 to 23:00 UTC, and a server whose tz
-- release is older than the engine's reads America/Vancouver at -08:00 from
-- 2026-11-01, where the engine's release says -07:00.
--
-- A scheduled run now records, with its row, the zones whose local day at its
-- clock the engine judges otherwise than the server (`local_days`: zone name
-- to ISO date; `{}` where they all agree, as they mostly do), and
-- duly_local_day takes a zone's day from the latest run at that clock that
-- recorded one, else from the server (duly_server_day, 0012's body): so the
-- value stays small and the trigger reads one row's. The nullable column
-- writes the catalog alone (no row is rewritten; ACCESS EXCLUSIVE on
-- duly_dispatch_run for milliseconds, waiting at most lock_timeout to get
-- it); the functions are replaced in place, and the trigger calls them by
-- name. The engine's days of the latest scheduled clocks recorded before
-- this migration are written by the migration step itself once it has
-- applied it (db.migrate, ledger.record_engine_days: the engine is Python),
-- so an edit made before the next scheduled run falls on the engine's day
-- too. Re-runnable.
SET lock_timeout = '5s';

ALTER TABLE duly_dispatch_run ADD COLUMN IF NOT EXISTS local_days jsonb;

-- The local day of an instant by the server's tz data; a zone PostgreSQL does
-- not know (the run faults the duty for it) reads as UTC rather than refusing
-- the writer's edit. The run records where the engine judges otherwise.
CREATE OR REPLACE FUNCTION duly_server_day(instant timestamptz, zone text)
    RETURNS date
    LANGUAGE plpgsql STABLE
AS $$
BEGIN
    RETURN (instant AT TIME ZONE zone)::date;
EXCEPTION WHEN invalid_parameter_value THEN
    RETURN (instant AT TIME ZONE 'UTC')::date;
END
$$;

-- Of the local days the engine judged for the zones at instant (days and
-- zones, in one order), those the server's tz data reads otherwise; {} where
-- none does.
CREATE OR REPLACE FUNCTION duly_engine_days_apart(instant timestamptz, zones text[], days date[])
    RETURNS jsonb
    LANGUAGE sql STABLE
AS $$
SELECT coalesce(jsonb_object_agg(e.zone, e.day), '{}'::jsonb)
FROM unnest(zones, days) AS e(zone, day)
WHERE e.day <> duly_server_day(instant, e.zone)
$$;

-- SECURITY DEFINER, as duly_latest_scheduled_clock: the writers that edit
-- duties need not read the ledger. The run's clock index finds the row.
CREATE OR REPLACE FUNCTION duly_local_day(instant timestamptz, zone text)
    RETURNS date
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path FROM CURRENT
AS $$
SELECT coalesce(
    ((SELECT r.local_days
      FROM duly_dispatch_run r
      WHERE r.clock = instant AND r.local_days IS NOT NULL
      ORDER BY r.id DESC
      LIMIT 1) ->> zone)::date,
    duly_server_day(instant, zone))
$$;
