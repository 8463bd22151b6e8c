-- duly:no-transaction
-- A duty moved to a zone whose day is ahead keeps its pause on the clock it
-- was placed at (docs/contract.md#account), reproduced by tests in
-- tests/run/test_duty_accounts.py first.
--
-- A pause marks dispatch_paused_on with the latest scheduled clock's day in
-- the duty's zone, and the spans resumes open start and end on such days.
-- Moved to a zone whose day at that clock is ahead, the duty kept them on the
-- old zone's days, read in the new zone's: a day of the new zone that became
-- owed before the pause's clock fell after the pause, in no span, and was
-- never created (paused, moved, resumed at one clock: Kiritimati's 21st lost,
-- where moved, paused, resumed created it). The pause and the spans now move
-- ahead by as many days as the new zone's day of the latest scheduled clock
-- is ahead of the old zone's: each mark lands on its clock's day in the new
-- zone where the scheduled clocks share their time of day (the daily
-- schedule), and within a day of it on a shorter interval. The account's own
-- day stays, as 0021 says (the new zone's days after it are owed), and so do
-- the change marks (a change owes as of the latest clock's day anyway).
--
-- The function is replaced in place; no row is rewritten.
SET lock_timeout = '5s';

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
    -- The account as this edit finds it, in the new zone's days.
    through date;
    changed date;
    window_since date;
    recast date;
    -- The latest clock's day in the old zone, whose days the account's are;
    -- the day the edit is placed on in them, and the day a change is judged
    -- on; whether the account moves back to the new zone's day.
    old_day date;
    edit_day date;
    judged date;
    moved_back boolean := false;
    -- Days the new zone's day of the latest clock is ahead of the old zone's.
    ahead integer;
    cadence_changed boolean;
    recast_due boolean := false;
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
    IF TG_OP = 'UPDATE' THEN
        through := OLD.dispatch_through;
        paused := OLD.dispatch_paused_on;
        spans := OLD.dispatch_owed_between;
        changed := OLD.dispatch_changed_on;
        window_since := OLD.dispatch_window_since;
        recast := OLD.dispatch_recast_on;
        old_day := CASE WHEN NEW.timezone IS DISTINCT FROM OLD.timezone
                        THEN duly_local_day(latest, OLD.timezone) ELSE latest_day END;
        cadence_changed := coalesce(
            (OLD.owner_id, OLD.organization_id, OLD.frequency, OLD.timezone, OLD.due_anchor,
             OLD.due_offset_days, OLD.due_offset_months, OLD.due_roll, OLD.holiday_calendar,
             OLD.lead_days, OLD.grace_days, OLD.effective_from, OLD.effective_to)
            IS DISTINCT FROM
            (NEW.owner_id, NEW.organization_id, NEW.frequency, NEW.timezone, NEW.due_anchor,
             NEW.due_offset_days, NEW.due_offset_months, NEW.due_roll, NEW.holiday_calendar,
             NEW.lead_days, NEW.grace_days, NEW.effective_from, NEW.effective_to), false);
    END IF;
    -- A change is judged on the account's own days, never before its day: a
    -- move to a zone whose day is ahead replaced nothing the old zone owed
    -- after its latest clock.
    judged := greatest(old_day, through);
    -- An account whose days lie after the latest clock's day in the duty's
    -- zone (now): moved to a zone whose day is behind, by this edit, or by
    -- one an earlier trigger kept on the old zone's days. The edit is placed
    -- on the account's own days, and the account then moves back to the
    -- zone's day (below).
    moved_back := coalesce(TG_OP = 'UPDATE' AND latest_day < judged, false);
    edit_day := CASE WHEN moved_back THEN judged ELSE latest_day END;
    -- Moved to a zone whose day at the latest clock is ahead of the old
    -- zone's: the pause and the spans, each placed on a scheduled clock's day
    -- in the old zone, move to that clock's day in the new one (migration
    -- 0025), so what became owed in the new zone before the pause stays owed.
    IF TG_OP = 'UPDATE' AND NOT moved_back AND latest_day > old_day THEN
        ahead := latest_day - old_day;
        paused := CASE WHEN paused > date '0001-01-01' THEN paused + ahead ELSE paused END;
        spans := (SELECT range_agg(daterange(lower(r) + ahead, upper(r) + ahead, '[)'))
                  FROM unnest(spans) r);
        NEW.dispatch_paused_on := paused;
        NEW.dispatch_owed_between := spans;
    END IF;
    is_now := coalesce(duly_owes(NEW.status, NEW.form, NEW.review_status), false);
    -- Whatever the edit, the next run reads the duty (migration 0014): the
    -- day it next owes was judged for the row as it stood.
    NEW.dispatch_next := date '0001-01-01';
    NEW.dispatch_next_at := timestamptz '0001-01-01 00:00:00+00';
    IF TG_OP = 'INSERT' THEN
        -- A new duty owes its current period and what became owed after
        -- the latest scheduled clock, as a changed one does, and nothing
        -- before it; with no run yet, it owes from the first run's origin.
        -- One added not owing (duly_owes) is paused from then on.
        NEW.dispatch_through := latest_day;
        NEW.dispatch_paused_on := CASE WHEN NOT is_now
                                       THEN coalesce(latest_day, date '0001-01-01') END;
        -- One added not owing owes nothing by its addition: its resume or
        -- approval marks what it owes.
        NEW.dispatch_changed_on := CASE WHEN is_now THEN latest_day END;
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
    was := coalesce(duly_owes(OLD.status, OLD.form, OLD.review_status), false);
    IF edit_day IS NOT NULL
       AND (OLD.effective_from, OLD.effective_to)
           IS DISTINCT FROM (NEW.effective_from, NEW.effective_to) THEN
        -- The window moves: what became owed up to the edit's day was owed
        -- only on the days the window held then (a period that became owed
        -- while the duty was outside it is never created), what becomes owed
        -- after it by the new window. The days the account owed after its
        -- own day, through the edit's, less those the old window did not
        -- hold, become the spans, which a pause at the account's day bounds.
        since := coalesce(through, date '0001-01-01');
        held := CASE WHEN paused IS NULL
                     THEN datemultirange(daterange(since, edit_day, '(]'))
                     ELSE (datemultirange(daterange(since, greatest(paused, since), '(]'))
                           + coalesce(spans, '{}'::datemultirange))
                          * datemultirange(daterange(since, edit_day, '(]'))
                END;
        -- The old window holds since the latest window edit, if any came
        -- after the account's day: the days before were judged by theirs.
        window_from := greatest(since, window_since);
        held := held * datemultirange(daterange(NULL, window_from, '(]'))
                + CASE WHEN OLD.effective_from > OLD.effective_to THEN '{}'::datemultirange
                       ELSE held * datemultirange(daterange(window_from, NULL, '()'))
                                 * datemultirange(daterange(OLD.effective_from,
                                                            OLD.effective_to, '[]'))
                  END;
        paused := since;
        spans := nullif(held, '{}'::datemultirange);
        window_since := edit_day;
        rewritten := true;
        NEW.dispatch_paused_on := paused;
        NEW.dispatch_owed_between := spans;
        NEW.dispatch_window_since := window_since;
    END IF;
    -- A change of what the duty owes (not of whether it owes) made on a day
    -- it had owed since its account's day: not paused since, paused after
    -- days it owed, or resumed before the change's day (the spans resumes
    -- opened), judged on the account's own days. An account no run kept owes from the first
    -- run's origin, which only a run knows: every such change is marked, and
    -- the page asks the same of it against the origin (page_owed.sql). A
    -- window edit asks it of the days its window held (above).
    recast_due := edit_day IS NOT NULL
        AND (through IS NULL OR judged > through)
        AND cadence_changed
        AND (through IS NULL
             OR paused IS NULL
             OR paused > through
             OR lower(spans) <= judged);
    IF recast_due THEN
        recast := greatest(recast, edit_day);
        NEW.dispatch_recast_on := recast;
    END IF;
    IF moved_back THEN
        -- Each of the account's days is the old zone's day of a clock no
        -- later than the latest (a run that kept it, an edit placed at it),
        -- so in the new zone none is after the latest clock's day there:
        -- every one after it moves back to it. (9999-12-31: a change no
        -- clock placed, which counts for every run, stays.)
        through := CASE WHEN through > latest_day THEN latest_day ELSE through END;
        paused := CASE WHEN paused > latest_day THEN latest_day ELSE paused END;
        spans := nullif(
            (SELECT range_agg(daterange(
                        CASE WHEN lower(r) > latest_day + 1 THEN latest_day + 1 ELSE lower(r) END,
                        CASE WHEN upper(r) > latest_day + 1 THEN latest_day + 1 ELSE upper(r) END))
             FROM unnest(spans) r),
            '{}'::datemultirange);
        changed := CASE WHEN changed > latest_day AND changed < date '9999-12-31'
                        THEN latest_day ELSE changed END;
        window_since := CASE WHEN window_since > latest_day THEN latest_day ELSE window_since END;
        recast := CASE WHEN recast > latest_day THEN latest_day ELSE recast END;
        NEW.dispatch_through := through;
        NEW.dispatch_paused_on := paused;
        NEW.dispatch_owed_between := spans;
        NEW.dispatch_changed_on := changed;
        NEW.dispatch_window_since := window_since;
        NEW.dispatch_recast_on := recast;
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
            paused, latest_day, through, date '0001-01-01');
        IF latest_day IS NOT NULL THEN
            NEW.dispatch_owed_between := nullif(
                spans * datemultirange(daterange(NULL, latest_day, '(]')),
                '{}'::datemultirange);
        END IF;
    ELSIF is_now AND NOT was AND latest_day IS NULL AND through IS NULL THEN
        -- Paused and resumed before any scheduled clock: the duty owes from
        -- the first run's origin as if never paused, and its row says so.
        NEW.dispatch_paused_on := NULL;
    ELSIF is_now AND (latest_day IS NOT NULL OR through IS NOT NULL) THEN
        -- A change owes as of its day: placed after the window's last day,
        -- it owes nothing in it, and the mark of an earlier change, placed
        -- in the window, stays (that change still owes what it owed).
        IF latest_day IS NULL OR NEW.effective_to IS NULL
           OR latest_day <= NEW.effective_to THEN
            NEW.dispatch_changed_on := greatest(
                changed, coalesce(latest_day, date '9999-12-31'));
        END IF;
        -- Resumed while a pause still bounds the account, or its window
        -- moved: what becomes owed from now on is owed again, whatever pause
        -- or change comes next. So does a change of a duty that owes while a
        -- pause bounds its account with no span open (a form no run knew,
        -- which the trigger before 0021 marked a pause): owed from its fix.
        IF latest_day IS NOT NULL
           AND ((NOT was AND paused IS NOT NULL) OR rewritten
                OR (paused IS NOT NULL AND NOT coalesce(upper_inf(spans), false))) THEN
            NEW.dispatch_owed_between := coalesce(spans, '{}'::datemultirange)
                + datemultirange(daterange(latest_day, NULL, '(]'));
        END IF;
    END IF;
    RETURN NEW;
END
$$;
