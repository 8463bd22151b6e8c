-- Each duty keeps its own account (docs/contract.md#account, docs/adr/0012):
-- what a run owes a duty is decided from columns on the duty's own row, not
-- from the clocks of earlier runs.
--
--   dispatch_through     the duty-local day through which its owed periods
--                        are dispatched; written by the page statement that
--                        writes the duty's tasks, never ahead of them. Null:
--                        no run has kept the account yet.
--   dispatch_paused_on   set when the duty stops being dispatchable: the local
--                        day of the latest scheduled clock before it stopped.
--                        Periods that became owed after it, while the duty
--                        was paused, retired or held for review, are not owed.
--   dispatch_changed_on  set when the duty becomes dispatchable again, or its
--                        cadence, owner or effective window changes: the local
--                        day of the latest scheduled clock before the change.
--                        The duty then owes its current period and those that
--                        became owed after that day, as a new duty would.
--   dispatch_version     counts those edits, so that a run's bookkeeping
--                        never overwrites an edit that committed while the run
--                        evaluated the duty.
--
-- The marks are written by a trigger, so every writer is covered: the Duly
-- application, a SQL console, a migration. A change is placed at the latest
-- scheduled clock before it, not at the wall clock, so that a run replaying
-- an older clock (a manual run, a test) reads the same account as the
-- scheduled run at that clock did.
--
-- Adding nullable columns, and a NOT NULL one with a constant default, only
-- writes the catalog: no row is rewritten, and the ACCESS EXCLUSIVE lock is
-- held for milliseconds, waiting at most lock_timeout to get it.
SELECT set_config('lock_timeout', '5s', true);

ALTER TABLE duly_duty
    ADD COLUMN IF NOT EXISTS dispatch_through date,
    ADD COLUMN IF NOT EXISTS dispatch_paused_on date,
    ADD COLUMN IF NOT EXISTS dispatch_changed_on date,
    ADD COLUMN IF NOT EXISTS dispatch_version bigint NOT NULL DEFAULT 0;

-- The rules a run judged with (tzdata, holidays, the dispatcher's own): a run
-- whose rules differ from the previous run's re-judges every account.
ALTER TABLE duly_dispatch_run ADD COLUMN IF NOT EXISTS rules text;

-- The latest clock a scheduled run may have judged duties at: an unscoped,
-- non-dry scheduled run whose clock was not later than the wall clock when it
-- started (a manual run at a future clock never counts). SECURITY DEFINER:
-- the writers that edit duties need not read the ledger.
CREATE OR REPLACE FUNCTION duly_latest_scheduled_clock()
    RETURNS timestamptz
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path FROM CURRENT
AS $$
SELECT r.clock
FROM duly_dispatch_run r
WHERE r.mode = 'scheduled' AND NOT r.dry_run
  AND r.organization_id IS NULL AND r.duty_ids IS NULL
  AND r.clock <= r.started_at
ORDER BY r.clock DESC
LIMIT 1
$$;

-- The local day of an instant in a duty's zone; a zone PostgreSQL does not
-- know (the run faults the duty for it) reads as UTC rather than refusing
-- the writer's edit.
CREATE OR REPLACE FUNCTION duly_local_day(instant timestamptz, zone text)
    RETURNS date
    LANGUAGE plpgsql STABLE
AS $$
BEGIN
    RETURN (instant AT TIME ZONE zone)::date;
EXCEPTION WHEN invalid_parameter_value THEN
    RETURN (instant AT TIME ZONE 'UTC')::date;
END
$$;

CREATE OR REPLACE FUNCTION duly_duty_account_mark()
    RETURNS trigger
    LANGUAGE plpgsql
    SET search_path FROM CURRENT
AS $$
DECLARE
    was boolean;
    is_now boolean;
    latest timestamptz;
    latest_day date;
BEGIN
    IF TG_OP = 'UPDATE' AND
       (OLD.form, OLD.status, OLD.review_status, OLD.owner_id, OLD.organization_id,
        OLD.frequency, OLD.timezone, OLD.due_anchor, OLD.due_offset_days,
        OLD.due_offset_months, OLD.due_roll, OLD.holiday_calendar, OLD.lead_days,
        OLD.grace_days, OLD.effective_from, OLD.effective_to)
       IS NOT DISTINCT FROM
       (NEW.form, NEW.status, NEW.review_status, NEW.owner_id, NEW.organization_id,
        NEW.frequency, NEW.timezone, NEW.due_anchor, NEW.due_offset_days,
        NEW.due_offset_months, NEW.due_roll, NEW.holiday_calendar, NEW.lead_days,
        NEW.grace_days, NEW.effective_from, NEW.effective_to) THEN
        RETURN NEW;
    END IF;
    latest := duly_latest_scheduled_clock();
    latest_day := CASE WHEN latest IS NOT NULL THEN duly_local_day(latest, NEW.timezone) END;
    IF TG_OP = 'INSERT' THEN
        -- A new duty owes its current period and what became owed after
        -- the latest scheduled clock, as a changed one does, and nothing
        -- before it; with no run yet, it owes from the first run's origin.
        NEW.dispatch_through := latest_day;
        NEW.dispatch_paused_on := NULL;
        NEW.dispatch_changed_on := latest_day;
        NEW.dispatch_version := 0;
        RETURN NEW;
    END IF;
    NEW.dispatch_version := OLD.dispatch_version + 1;
    was := coalesce(duly_dispatchable(OLD.status, OLD.form, OLD.review_status), false);
    is_now := coalesce(duly_dispatchable(NEW.status, NEW.form, NEW.review_status), false);
    -- With no scheduled clock in the ledger (runs made without it), a pause
    -- is placed at the account's own day, and a change after any day: the
    -- duty then owes its current period and those its lead opened. The far
    -- days are dates every driver reads (no 'infinity').
    IF was AND NOT is_now THEN
        -- The first pause since the account was kept bounds what it owed.
        NEW.dispatch_paused_on := coalesce(
            OLD.dispatch_paused_on, latest_day, OLD.dispatch_through, date '0001-01-01');
    ELSIF is_now THEN
        NEW.dispatch_changed_on := greatest(
            OLD.dispatch_changed_on, coalesce(latest_day, date '9999-12-31'));
    END IF;
    RETURN NEW;
END
$$;

-- UPDATE OF the columns that decide what a duty owes: the dispatcher's own
-- bookkeeping (last_dispatched_period and the account) never fires it.
DROP TRIGGER IF EXISTS duly_duty_account ON duly_duty;
CREATE TRIGGER duly_duty_account
    BEFORE INSERT OR UPDATE OF form, status, review_status, owner_id, organization_id,
        frequency, timezone, due_anchor, due_offset_days, due_offset_months, due_roll,
        holiday_calendar, lead_days, grace_days, effective_from, effective_to
    ON duly_duty
    FOR EACH ROW EXECUTE FUNCTION duly_duty_account_mark();

-- The account is the dispatcher's to keep; the set-aside ledger is no longer
-- marked repaid (an account makes the next run owe a set-aside duty).
DO $$
BEGIN
    EXECUTE format(
        'GRANT UPDATE (dispatch_through, dispatch_paused_on, dispatch_changed_on)'
        ' ON duly_duty TO %I', duly_dispatcher_role());
    EXECUTE format(
        'REVOKE UPDATE (repaid_by) ON duly_dispatch_set_aside FROM %I', duly_dispatcher_role());
END
$$;
