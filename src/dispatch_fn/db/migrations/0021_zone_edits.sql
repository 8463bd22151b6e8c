-- duly:no-transaction
-- Three repairs of the account's marks (docs/contract.md#account,
-- docs/adr/0012), each reproduced by tests in tests/run/test_duty_accounts.py
-- first:
--
-- * A zone edit kept the account's days in the old zone. The trigger placed
--   an edit at the latest scheduled clock's day in the duty's zone after the
--   edit, never before the account's own day; but the account's days and
--   marks are local days of the zone the duty had. Moved to a zone whose day
--   at that clock is behind the old zone's (Pacific/Kiritimati to
--   Pacific/Pago_Pago, 25 hours apart), the edit landed on the account's day
--   and earlier marks stayed on the old zone's days, ahead of every run's
--   today in the new zone, and the runs owed nothing they bring until the
--   new zone reached them: a duty made weekly in the same edit lost the week
--   it was in, a new owner the days between, a duty resumed before the move
--   its current day. Every day the account holds is the old zone's day of a
--   clock no later than the latest scheduled clock (a run that kept it, or
--   an edit placed at it), so in the new zone it falls on or before that
--   clock's day there: each one after it (the account's day, the pause, the
--   spans' bounds, the change and window days) moves back to it; so does an
--   account an earlier trigger left after its zone's day, at its next edit.
-- * Whether a change replaced a cadence that still owed (dispatch_recast_on,
--   changed_while_owed) was judged on the new zone's day against the
--   account's, days of two zones: a move behind hid a set-aside day the old
--   cadence owed, a move ahead counted one it never owed, and a change day
--   left on the old zone's days was counted again by a later run. The edit
--   is placed on the old zone's day, and the change judged there on the
--   account as the edit finds it (with a window edit in the same statement,
--   on the days the old window held), before the account moves back; and
--   the page counts a kept account's change day on or after its day
--   (page_owed.sql), since a move behind brings both to the same day.
-- * A duty of a form no run knows (a typo: the run's unknown_form fault) was
--   marked paused, as a standing or one-off duty is: fixed later, it owed
--   only its current period. Its periods become owed as a recurring duty's
--   do (duly_owes), so once fixed it owes what became owed meanwhile, as a
--   duty whose zone a fix made known again does. A duty already of an
--   unknown form when this is applied keeps the pause the old trigger
--   marked: fixed, it owes its current period and what follows, as before
--   (no row is rewritten: a pause for an unknown form looks like any other).
--
-- The functions are replaced in place (the trigger, 0012's and the
-- partitioned layout's, calls it by name); no row is rewritten.
SET lock_timeout = '5s';

-- Whether the periods of a duty with these values become owed: an active,
-- approved duty of any form but the two that are never dispatched (standing,
-- one-off). A run reads only the dispatchable (duly_dispatchable, the partial
-- indexes' predicate) and faults one of another form (unknown_form).
CREATE OR REPLACE FUNCTION duly_owes(status text, form text, review_status text)
    RETURNS boolean
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
SELECT status = 'active' AND review_status = 'approved'
       AND form IS DISTINCT FROM 'standing' AND form IS DISTINCT FROM 'one_off'
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
        NEW.dispatch_changed_on := greatest(
            changed, coalesce(latest_day, date '9999-12-31'));
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
