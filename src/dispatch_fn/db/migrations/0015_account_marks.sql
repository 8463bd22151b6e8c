-- The account's marks (migration 0012, docs/contract.md#account), where two
-- edits left the wrong ones:
--
--   * A duty added while it is not dispatchable (paused, retired, held for
--     review) is marked paused from the day it was added: what becomes owed
--     before it is resumed or approved is never owed. It was left unmarked,
--     so its resume owed every day since it was added.
--   * An edit made before any scheduled clock (no run yet, or only manual
--     runs at future clocks) leaves a duty no run has kept as it was: it owes
--     from the first run's origin, as a duty added then does. It was marked
--     changed on 9999-12-31, and greatest() kept that day through every later
--     edit, so such a duty owed only its current period until a run kept it:
--     a zone broken before the first run and fixed later lost what became
--     owed in between.
--
-- Only the function is replaced (with 0014's reset of the next owed day):
-- the trigger (0012, and the partitioned layout's) keeps its columns and
-- calls it by name.
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
    is_now := coalesce(duly_dispatchable(NEW.status, NEW.form, NEW.review_status), false);
    -- Whatever the edit, the next run reads the duty (migration 0014): the
    -- day it next owes was judged for the row as it stood.
    NEW.dispatch_next := date '0001-01-01';
    IF TG_OP = 'INSERT' THEN
        -- A new duty owes its current period and what became owed after
        -- the latest scheduled clock, as a changed one does, and nothing
        -- before it; with no run yet, it owes from the first run's origin.
        -- One added not dispatchable is paused from then on.
        NEW.dispatch_through := latest_day;
        NEW.dispatch_paused_on := CASE WHEN NOT is_now
                                       THEN coalesce(latest_day, date '0001-01-01') END;
        NEW.dispatch_changed_on := latest_day;
        NEW.dispatch_version := 0;
        RETURN NEW;
    END IF;
    NEW.dispatch_version := OLD.dispatch_version + 1;
    was := coalesce(duly_dispatchable(OLD.status, OLD.form, OLD.review_status), false);
    -- With no scheduled clock in the ledger (runs made without it), a pause
    -- is placed at the account's own day, and a change of a kept account
    -- after any day: the duty then owes its current period and those its
    -- lead opened. A duty no run kept owes from the first run's origin
    -- whatever was edited before it. The far days are dates every driver
    -- reads (no 'infinity').
    IF was AND NOT is_now THEN
        -- The first pause since the account was kept bounds what it owed.
        NEW.dispatch_paused_on := coalesce(
            OLD.dispatch_paused_on, latest_day, OLD.dispatch_through, date '0001-01-01');
    ELSIF is_now AND (latest_day IS NOT NULL OR OLD.dispatch_through IS NOT NULL) THEN
        NEW.dispatch_changed_on := greatest(
            OLD.dispatch_changed_on, coalesce(latest_day, date '9999-12-31'));
    END IF;
    RETURN NEW;
END
$$;
