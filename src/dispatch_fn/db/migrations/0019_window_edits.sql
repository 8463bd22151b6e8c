-- duly:no-transaction
-- Two repairs of the account's marks (docs/contract.md#account, docs/adr/0012),
-- each reproduced by a test first:
--
-- * An edit of the effective window judged the days before it by the new
--   window. A duty whose window had ended (or not begun), its window then
--   extended, owed the days that became owed while it was outside the window
--   as it stood then: a daily duty ended on the 20th, extended after the
--   22nd's run, got the 21st and the 22nd (tests/run/test_duty_accounts.py).
--   An edit of the window now writes down, as the account's spans, the days
--   after the account's day, up to the edit's, that the account owed and the
--   window as it stood held, and owes what becomes owed after the edit by
--   the new window.
-- * On a layout partitioned by organisation (docs/adr/0005), a duty moved to
--   another organisation moves between partitions: PostgreSQL deletes the
--   row from one and inserts it in the other, and the insert fired the
--   trigger's branch for a new row, which started a new account. The update
--   now hands the insert that follows it the row it marked
--   (tests/db/test_shard_keys.py).
--
-- The function is replaced in place (the trigger, 0012's and the partitioned
-- layout's, calls it by name), and one nullable column is added, which writes
-- the catalog alone (no row is rewritten; ACCESS EXCLUSIVE for milliseconds,
-- waiting at most lock_timeout to get it):
--
--   dispatch_window_since   the day of the latest window edit: the window as
--                           it stands holds since then, so the next window
--                           edit judges by it only the days after it (the
--                           days before were written down by the edit that
--                           made them). Null: no window edit since the row
--                           was added. Only the trigger writes it.
SET lock_timeout = '5s';

ALTER TABLE duly_duty ADD COLUMN IF NOT EXISTS dispatch_window_since date;

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
    paused date;
    spans datemultirange;
    held datemultirange;
    since date;
    window_from date;
    rewritten boolean := false;
BEGIN
    -- A row an update moved between partitions: the update marked it.
    IF TG_OP = 'INSERT'
       AND current_setting('duly.account_moved', true)
           = format('%s/%s/%s', NEW.organization_id, NEW.id, NEW.dispatch_version) THEN
        PERFORM set_config('duly.account_moved', '', true);
        RETURN NEW;
    END IF;
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
    IF TG_OP = 'INSERT' THEN
        latest := duly_latest_scheduled_clock(NEW.organization_id, NEW.id);
    ELSE
        latest := duly_latest_scheduled_clock(OLD.organization_id, OLD.id);
    END IF;
    latest_day := CASE WHEN latest IS NOT NULL THEN duly_local_day(latest, NEW.timezone) END;
    -- Never before the account's own day: a run kept it there, so the edit
    -- came after that day's clock (a zone edit can read the clock a day
    -- earlier in the new zone).
    IF TG_OP = 'UPDATE' AND latest_day < OLD.dispatch_through THEN
        latest_day := OLD.dispatch_through;
    END IF;
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
        NEW.dispatch_owed_between := NULL;
        NEW.dispatch_recast_on := NULL;
        NEW.dispatch_window_since := NULL;
        NEW.dispatch_version := 0;
        RETURN NEW;
    END IF;
    NEW.dispatch_version := OLD.dispatch_version + 1;
    IF OLD.organization_id IS DISTINCT FROM NEW.organization_id THEN
        -- On a layout partitioned by organisation the row moves: the insert
        -- that follows in the other partition keeps what this update marks.
        PERFORM set_config('duly.account_moved',
                           format('%s/%s/%s', NEW.organization_id, NEW.id, NEW.dispatch_version),
                           true);
    END IF;
    was := coalesce(duly_dispatchable(OLD.status, OLD.form, OLD.review_status), false);
    paused := OLD.dispatch_paused_on;
    spans := OLD.dispatch_owed_between;
    IF latest_day IS NOT NULL
       AND (OLD.effective_from, OLD.effective_to)
           IS DISTINCT FROM (NEW.effective_from, NEW.effective_to) THEN
        -- The window moves: what became owed up to the edit's day was owed
        -- only on the days the window held then (a period that became owed
        -- while the duty was outside it is never created), what becomes owed
        -- after it by the new window. The days the account owed after its
        -- own day, through the edit's, less those the old window did not
        -- hold, become the spans, which a pause at the account's day bounds.
        since := coalesce(OLD.dispatch_through, date '0001-01-01');
        held := CASE WHEN paused IS NULL
                     THEN datemultirange(daterange(since, latest_day, '(]'))
                     ELSE (datemultirange(daterange(since, greatest(paused, since), '(]'))
                           + coalesce(spans, '{}'::datemultirange))
                          * datemultirange(daterange(since, latest_day, '(]'))
                END;
        -- The old window holds since the latest window edit, if any came
        -- after the account's day: the days before were judged by theirs.
        window_from := greatest(since, OLD.dispatch_window_since);
        held := held * datemultirange(daterange(NULL, window_from, '(]'))
                + CASE WHEN OLD.effective_from > OLD.effective_to THEN '{}'::datemultirange
                       ELSE held * datemultirange(daterange(window_from, NULL, '()'))
                                 * datemultirange(daterange(OLD.effective_from,
                                                            OLD.effective_to, '[]'))
                  END;
        paused := since;
        spans := nullif(held, '{}'::datemultirange);
        rewritten := true;
        NEW.dispatch_paused_on := paused;
        NEW.dispatch_owed_between := spans;
        NEW.dispatch_window_since := latest_day;
    END IF;
    -- A change of what the duty owes (not of whether it is dispatchable) made
    -- on a day it had been dispatchable since its account's day: not paused
    -- since, paused after days it owed, or resumed before the change's day
    -- (the spans resumes opened). An account no run kept owes from the first
    -- run's origin, which only a run knows: every such change is marked, and
    -- the page asks the same of it against the origin (page_owed.sql). A
    -- window edit asks it of the days its window held (above).
    IF latest_day IS NOT NULL
       AND (OLD.dispatch_through IS NULL OR latest_day > OLD.dispatch_through)
       AND (OLD.owner_id, OLD.organization_id, OLD.frequency, OLD.timezone, OLD.due_anchor,
            OLD.due_offset_days, OLD.due_offset_months, OLD.due_roll, OLD.holiday_calendar,
            OLD.lead_days, OLD.grace_days, OLD.effective_from, OLD.effective_to)
           IS DISTINCT FROM
           (NEW.owner_id, NEW.organization_id, NEW.frequency, NEW.timezone, NEW.due_anchor,
            NEW.due_offset_days, NEW.due_offset_months, NEW.due_roll, NEW.holiday_calendar,
            NEW.lead_days, NEW.grace_days, NEW.effective_from, NEW.effective_to)
       AND (OLD.dispatch_through IS NULL
            OR paused IS NULL
            OR paused > OLD.dispatch_through
            OR lower(spans) <= latest_day) THEN
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
            paused, latest_day, OLD.dispatch_through, date '0001-01-01');
        IF latest_day IS NOT NULL THEN
            NEW.dispatch_owed_between := nullif(
                spans * datemultirange(daterange(NULL, latest_day, '(]')),
                '{}'::datemultirange);
        END IF;
    ELSIF is_now AND NOT was AND latest_day IS NULL AND OLD.dispatch_through IS NULL THEN
        -- Paused and resumed before any scheduled clock: the duty owes from
        -- the first run's origin as if never paused, and its row says so.
        NEW.dispatch_paused_on := NULL;
    ELSIF is_now AND (latest_day IS NOT NULL OR OLD.dispatch_through IS NOT NULL) THEN
        NEW.dispatch_changed_on := greatest(
            OLD.dispatch_changed_on, coalesce(latest_day, date '9999-12-31'));
        -- Resumed while a pause still bounds the account, or its window
        -- moved: what becomes owed from now on is owed again, whatever pause
        -- or change comes next.
        IF latest_day IS NOT NULL AND ((NOT was AND paused IS NOT NULL) OR rewritten) THEN
            NEW.dispatch_owed_between := coalesce(spans, '{}'::datemultirange)
                + datemultirange(daterange(latest_day, NULL, '(]'));
        END IF;
    END IF;
    RETURN NEW;
END
$$;
