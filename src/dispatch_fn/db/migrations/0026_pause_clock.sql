-- duly:no-transaction
-- A pause keeps its own clock, so a move to a zone whose day is ahead loses
-- no day that became owed before it (docs/contract.md#account), reproduced
-- by tests in tests/run/test_duty_accounts.py first.
--
-- The account's days are days of the duty's zone, and a move to a zone ahead
-- keeps them (migration 0021): the new zone's days after the account's are
-- owed. A pause's mark is the old zone's day of the latest scheduled clock
-- when it was made; kept as it stood, it cut off the new zone's days that
-- began before that clock. A daily duty in Pacific/Pago_Pago paused, moved
-- to Pacific/Kiritimati and resumed, all after the run of the 21st (01:00
-- UTC: Pago Pago's 20th, Kiritimati's 21st), never got Kiritimati's 21st,
-- which began at 10:00 UTC on the 20th while it was dispatchable; resumed,
-- moved, then paused, it did.
--
-- The trigger now keeps the clock of a pause it places
-- (dispatch_paused_at). A move to a zone ahead places the pause on that
-- clock's day in the new zone, and so does a move behind (not on the latest
-- clock's day there, an upper bound: a paused duty moved ahead and back owed
-- a day that began while paused). Only the trigger reads it, at a zone edit:
-- no page reads it. A pause of a duty added not owing, or one a window edit
-- placed at the account's day, has no clock and stays where it is, as does
-- one a run at a past clock kept and moved off its clock's day; so do the
-- spans' bounds, which keep no clock. Rejected: moving the pause by
-- as many days as the new zone's day of the latest clock is ahead (undone
-- before it landed): a duty added paused then moved owed a day from before
-- its addition, and a pause made before a clock change, moved after it,
-- owed a day that began while it was paused.
--
-- One nullable column (a catalog change under a lock held for
-- milliseconds, waiting at most lock_timeout), and the function replaced in
-- place (the trigger, 0012's and the partitioned layout's, calls it by name);
-- no row is rewritten: a pause made before this migration has no clock and
-- stays where it is.
SET lock_timeout = '5s';

ALTER TABLE duly_duty ADD COLUMN IF NOT EXISTS dispatch_paused_at timestamptz;

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
        -- Added not owing is no pause of a duty that owed: no clock.
        NEW.dispatch_paused_at := NULL;
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
        NEW.dispatch_paused_at := NULL;
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
        -- A pause still on its clock's day goes to that clock's day in the
        -- new zone: exact, where the latest clock's is an upper bound (a
        -- pause a move ahead placed on a later day comes back).
        IF NOT rewritten AND OLD.dispatch_paused_at IS NOT NULL
           AND duly_local_day(OLD.dispatch_paused_at, OLD.timezone) = OLD.dispatch_paused_on THEN
            paused := least(paused, duly_local_day(OLD.dispatch_paused_at, NEW.timezone));
        END IF;
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
        IF paused IS NULL THEN
            -- The clock whose day the pause is: a move to a zone ahead
            -- places it on that clock's day there (below).
            NEW.dispatch_paused_at := latest;
        END IF;
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
    -- Moved to a zone whose day is ahead while a pause this edit left alone
    -- bounds the account: the pause is the old zone's day of its own clock,
    -- and the new zone's days that began by that clock became owed while
    -- the duty was dispatchable. It moves to that clock's day in the new
    -- zone, unless something other than a pause at that clock placed it
    -- (its day there is no longer the clock's).
    IF NEW.timezone IS DISTINCT FROM OLD.timezone AND NOT moved_back AND NOT rewritten
       AND OLD.dispatch_paused_at IS NOT NULL
       AND NEW.dispatch_paused_on IS NOT DISTINCT FROM OLD.dispatch_paused_on
       AND duly_local_day(OLD.dispatch_paused_at, OLD.timezone) = OLD.dispatch_paused_on THEN
        NEW.dispatch_paused_on := greatest(
            OLD.dispatch_paused_on, duly_local_day(OLD.dispatch_paused_at, NEW.timezone));
    END IF;
    RETURN NEW;
END
$$;
