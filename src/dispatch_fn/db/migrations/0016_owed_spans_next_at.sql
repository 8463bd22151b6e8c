-- duly:no-transaction
-- The account, twice more (docs/contract.md#account, docs/adr/0012):
--
--   dispatch_owed_between   the local days after a resume, up to the next
--                           pause, on which the duty was dispatchable while
--                           an earlier pause still bounds the account
--                           (dispatch_paused_on after dispatch_through).
--                           What became owed on them is owed. Null: none.
--   dispatch_next_at        the instant dispatch_next begins in the duty's
--                           zone, or earlier, never later: a scheduled run
--                           reads the duties whose instant its clock has
--                           reached. The index holds it in place of the day.
--                           '0001-01-01 00:00:00+00' (the default, and what
--                           the trigger writes with the day): every run
--                           reads it.
--
-- Spans: a duty paused when it still owed days, resumed, then paused again
-- before any run read it (a set-aside or a fault in between passes it over)
-- kept the first span only: dispatch_paused_on bounds the account, and the
-- resume's mark moved on to the second resume, so what became owed between
-- the first resume and the second pause was lost. The trigger now opens a
-- span at each such resume and closes it at the next pause; the page
-- statement owes what became owed in the spans and clears them with the
-- other marks.
--
-- The instant: compared with a local day, a run's clock has reached the
-- latest date on earth (UTC+14) before a zone behind UTC begins that day, so
-- a run read such a duty a day before it owed anything (at 01:00 UTC, every
-- duty of the Americas whose day had come in Asia): at 200,000 duties a
-- no-op re-run read 5,314 duties, and a week of daily runs read 20,361
-- duties that owed nothing, of 180,913 (docs/adr/0012).
--
-- Each statement commits alone: the columns are added to the catalog only
-- (ACCESS EXCLUSIVE for milliseconds, waiting at most lock_timeout), the
-- index is built and the old one dropped CONCURRENTLY, so writers go on
-- throughout, and the function is replaced in place (the trigger, 0012's and
-- the partitioned layout's, calls it by name). Every step is re-runnable.
-- Until the first run after it every duty's instant is the default, so that
-- run reads every duty, as after migration 0014.
SET lock_timeout = '5s';

ALTER TABLE duly_duty ADD COLUMN IF NOT EXISTS dispatch_owed_between datemultirange;

ALTER TABLE duly_duty ADD COLUMN IF NOT EXISTS dispatch_next_at timestamptz NOT NULL
    DEFAULT timestamptz '0001-01-01 00:00:00+00';

CREATE INDEX CONCURRENTLY IF NOT EXISTS duly_duty_next_at
    ON duly_duty (id, dispatch_next_at) INCLUDE (organization_id)
    WHERE status = 'active' AND form = 'recurring' AND review_status = 'approved';

DROP INDEX CONCURRENTLY IF EXISTS duly_duty_dispatch_next;

DO $$
BEGIN
    EXECUTE format('GRANT UPDATE (dispatch_owed_between, dispatch_next_at) ON duly_duty TO %I',
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
    -- With no scheduled clock in the ledger (runs made without it), a pause
    -- is placed at the account's own day, and a change of a kept account
    -- after any day: the duty then owes its current period and those its
    -- lead opened. A duty no run kept owes from the first run's origin
    -- whatever was edited before it. The far days are dates every driver
    -- reads (no 'infinity').
    IF was AND NOT is_now AND OLD.dispatch_paused_on <= OLD.dispatch_through
       AND latest_day IS NOT NULL THEN
        -- Paused again since a pause that owed nothing (it came on the
        -- account's day) and the resume after it: what it owes starts at that
        -- resume, so the account passes the days between, where nothing was
        -- owed, and this pause bounds what it owes.
        NEW.dispatch_through := greatest(
            OLD.dispatch_through, least(OLD.dispatch_changed_on, latest_day));
        NEW.dispatch_paused_on := greatest(NEW.dispatch_through, latest_day);
    ELSIF was AND NOT is_now THEN
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
        -- Resumed while a pause that owed days still bounds the account: what
        -- becomes owed from now on is owed again, whatever pause comes next.
        IF NOT was AND latest_day IS NOT NULL
           AND OLD.dispatch_paused_on > coalesce(OLD.dispatch_through, date '0001-01-01') THEN
            NEW.dispatch_owed_between := coalesce(OLD.dispatch_owed_between, '{}'::datemultirange)
                + datemultirange(daterange(latest_day, NULL, '(]'));
        END IF;
    END IF;
    RETURN NEW;
END
$$;
