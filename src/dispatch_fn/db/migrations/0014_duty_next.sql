-- duly:no-transaction
-- A run reads what is owed (docs/contract.md#account, docs/adr/0012): each
-- duty's account gains the local day on which it next owes something, and a
-- scheduled run reads, through an index, only the duties whose day has come.
--
--   dispatch_next   the first local day on which a run could owe the duty
--                   anything or move its account: written with the account,
--                   in the statement that writes the duty's tasks. A day no
--                   later than the first day any period not yet owed becomes
--                   owed, so a duty the index passes over owes nothing.
--                   '0001-01-01' (the default, and what the trigger writes on
--                   any edit that marks the account): every run reads it.
--                   '9999-12-31': nothing more until an edit, its effective
--                   window being over. Plain dates every driver reads.
--
-- Each statement commits alone: adding a NOT NULL column with a constant
-- default writes the catalog only (no row is rewritten; ACCESS EXCLUSIVE for
-- milliseconds, waiting at most lock_timeout to get it), and the indexes are
-- built and dropped CONCURRENTLY, so writers go on throughout. Every step is
-- re-runnable.
SET lock_timeout = '5s';

ALTER TABLE duly_duty
    ADD COLUMN IF NOT EXISTS dispatch_next date NOT NULL DEFAULT date '0001-01-01';

-- Migration 0012's marks, which now also send the duty back to the next run.
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
    -- Whatever the edit, the next run reads the duty: the day it next owes
    -- was judged for the row as it stood.
    NEW.dispatch_next := date '0001-01-01';
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

-- The pages walk the dispatchable duties in id order, and a scheduled run
-- takes those whose day has come: the day is a key column, so the index
-- itself tests it and the heap is read only for the duties owed. It serves
-- every walk migration 0006's index did (id order, the same predicate), which
-- it replaces: with the day indexed an account write is no HOT update, and
-- each index the row has costs that write an entry.
CREATE INDEX CONCURRENTLY IF NOT EXISTS duly_duty_dispatch_next
    ON duly_duty (id, dispatch_next) INCLUDE (organization_id)
    WHERE status = 'active' AND form = 'recurring' AND review_status = 'approved';

DROP INDEX CONCURRENTLY IF EXISTS duly_duty_dispatchable_approved;

-- A scheduled run still counts the duties it does not dispatch, by reason
-- (docs/contract.md#selection), and reports those whose form it does not know
-- as faults: from this index alone (an index-only scan), not from their rows.
CREATE INDEX CONCURRENTLY IF NOT EXISTS duly_duty_left_out
    ON duly_duty (form, status, review_status) INCLUDE (organization_id, id)
    WHERE status IS DISTINCT FROM 'active' OR form IS DISTINCT FROM 'recurring'
       OR review_status IS DISTINCT FROM 'approved';

DO $$
BEGIN
    EXECUTE format('GRANT UPDATE (dispatch_next) ON duly_duty TO %I', duly_dispatcher_role());
END
$$;
