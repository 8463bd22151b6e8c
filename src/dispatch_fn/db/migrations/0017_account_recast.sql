-- duly:no-transaction
-- The account's last mark (docs/contract.md#account, docs/adr/0012):
--
--   dispatch_recast_on   the local day of the latest change to the duty's
--                        cadence, owner or effective window made after its
--                        account's day, on a day the duty had been
--                        dispatchable since that day: what became owed
--                        under the cadence the change replaced and was not
--                        created (a set-aside or a fault passed it over) is
--                        not spelled by the new one. Null: no such change.
--
-- The report counts such duties (changed_while_owed). It read them from
-- dispatch_changed_on with no pause marked, and a resume marks that day
-- too: a change made while the duty was paused, after days it still owed,
-- or after a resume from a pause that owed nothing, was left out of the
-- count (tests/run/test_duty_accounts.py). The trigger now tells a change
-- from a resume, at the edit, from the account as it stood.
--
-- And a resume opens a span whenever a pause bounds the account, also one
-- that owed nothing (it came on the account's day). Migration 0015 moved the
-- account up to the resume's day at the next pause instead, reading that day
-- from dispatch_changed_on; a change between the resume and that pause moved
-- the mark, and the days between the resume and the change were lost behind
-- a run that said it was complete (tests/run/test_duty_accounts.py).
--
-- Each statement commits alone: the column is added to the catalog only
-- (ACCESS EXCLUSIVE for milliseconds, waiting at most lock_timeout), and the
-- function is replaced in place (the trigger, 0012's and the partitioned
-- layout's, calls it by name). Every step is re-runnable.
SET lock_timeout = '5s';

ALTER TABLE duly_duty ADD COLUMN IF NOT EXISTS dispatch_recast_on date;

DO $$
BEGIN
    EXECUTE format('GRANT UPDATE (dispatch_recast_on) ON duly_duty TO %I',
                   duly_dispatcher_role());
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
    is_now := coalesce(duly_dispatchable(NEW.status, NEW.form, NEW.review_status), false);
    -- Whatever the edit, the next run reads the duty (migration 0014): the
    -- day it next owes was judged for the row as it stood.
    NEW.dispatch_next := date '0001-01-01';
    NEW.dispatch_next_at := timestamptz '0001-01-01 00:00:00+00';
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
    -- A change of what the duty owes (not of whether it is dispatchable) made
    -- on a day it had been dispatchable since its account's day: not paused
    -- since, paused after days it owed, or resumed before the change's day
    -- (the spans resumes opened).
    IF latest_day IS NOT NULL AND OLD.dispatch_through IS NOT NULL
       AND latest_day > OLD.dispatch_through
       AND (OLD.owner_id, OLD.organization_id, OLD.frequency, OLD.timezone, OLD.due_anchor,
            OLD.due_offset_days, OLD.due_offset_months, OLD.due_roll, OLD.holiday_calendar,
            OLD.lead_days, OLD.grace_days, OLD.effective_from, OLD.effective_to)
           IS DISTINCT FROM
           (NEW.owner_id, NEW.organization_id, NEW.frequency, NEW.timezone, NEW.due_anchor,
            NEW.due_offset_days, NEW.due_offset_months, NEW.due_roll, NEW.holiday_calendar,
            NEW.lead_days, NEW.grace_days, NEW.effective_from, NEW.effective_to)
       AND (OLD.dispatch_paused_on IS NULL
            OR OLD.dispatch_paused_on > OLD.dispatch_through
            OR lower(OLD.dispatch_owed_between) <= latest_day) THEN
        NEW.dispatch_recast_on := greatest(OLD.dispatch_recast_on, latest_day);
    END IF;
    -- With no scheduled clock in the ledger (runs made without it), a pause
    -- is placed at the account's own day, and a change of a kept account
    -- after any day: the duty then owes its current period and those its
    -- lead opened. A duty no run kept owes from the first run's origin
    -- whatever was edited before it. The far days are dates every driver
    -- reads (no 'infinity').
    IF was AND NOT is_now THEN
        -- The first pause since the account was kept bounds what it owed;
        -- a later one closes the span its resume opened.
        NEW.dispatch_paused_on := coalesce(
            OLD.dispatch_paused_on, latest_day, OLD.dispatch_through, date '0001-01-01');
        IF latest_day IS NOT NULL THEN
            NEW.dispatch_owed_between := nullif(
                OLD.dispatch_owed_between
                    * datemultirange(daterange(NULL, latest_day, '(]')),
                '{}'::datemultirange);
        END IF;
    ELSIF is_now AND (latest_day IS NOT NULL OR OLD.dispatch_through IS NOT NULL) THEN
        NEW.dispatch_changed_on := greatest(
            OLD.dispatch_changed_on, coalesce(latest_day, date '9999-12-31'));
        -- Resumed while a pause still bounds the account: what becomes owed
        -- from now on is owed again, whatever pause or change comes next.
        IF NOT was AND latest_day IS NOT NULL AND OLD.dispatch_paused_on IS NOT NULL THEN
            NEW.dispatch_owed_between := coalesce(OLD.dispatch_owed_between, '{}'::datemultirange)
                + datemultirange(daterange(latest_day, NULL, '(]'));
        END IF;
    END IF;
    RETURN NEW;
END
$$;
