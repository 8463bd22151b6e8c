-- duly:no-transaction
-- Four repairs of the account's marks (docs/contract.md#account, docs/adr/0012),
-- each reproduced by a test in tests/run/test_duty_accounts.py first:
--
-- * A row inserted as a copy of another (INSERT ... SELECT * from a console)
--   kept the copied duty's spans and change day: the copy, paused from its
--   insert, was owed the days the spans held. An insert now starts its own
--   account whatever it carries.
-- * A change to a duty no run has kept an account for (set aside or faulted
--   by every run since the first that keeps accounts) was never counted in
--   changed_while_owed: the mark needed a kept account's day. Such a duty
--   owes from the first run's origin, which only a run knows; the trigger
--   marks every change made with a scheduled clock, and the page asks of it
--   what the trigger asks of a kept account, against the origin. A duty
--   paused and resumed before any scheduled clock loses its pause mark: it
--   owes from the origin as if never paused, and the page reads it so.
-- * An edit was placed at the latest unscoped run's clock, while runs scoped
--   to the duty's organisation, or naming it, keep its account too: after
--   such runs (the schedule paused, an operator running one organisation) a
--   reassigned duty's new owner got the days those runs had dispatched, and
--   a duty paused over them the days they found it paused. An edit is now
--   placed at the latest clock of a run that covered the duty, and never
--   before its account's own day.
-- * Rows in flight when migration 0017 was applied: a duty resumed under
--   0016 from a pause that owed nothing opened no span, and 0017 dropped the
--   move of the account that 0016 made at the next pause instead; a change
--   made under 0016 left no dispatch_recast_on. The data steps below give
--   such rows the span and the mark 0017's trigger would have given them,
--   and leave every other row as it is (tests/db/test_account_repair.py).
--
-- Each statement commits alone: the functions are replaced in place (the
-- trigger, 0012's and the partitioned layout's, calls it by name), and each
-- data step is one UPDATE that takes the row locks of the rows it repairs
-- only, waiting at most lock_timeout. The UPDATEs write no column the
-- trigger watches, so it does not fire. Every step is re-runnable.
SET lock_timeout = '5s';

-- The latest clock a non-dry scheduled run judged the duty at, or could have:
-- an unscoped run, or one scoped to the duty's organisation or naming it,
-- whose clock was not later than the wall clock when it started (0012's
-- duly_latest_scheduled_clock() counts the unscoped alone). Read backwards
-- along the ledger's clock index, it stops at the first run that covered the
-- duty: the latest unscoped run, unless scoped runs came after it.
CREATE OR REPLACE FUNCTION duly_latest_scheduled_clock(organization text, duty text)
    RETURNS timestamptz
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path FROM CURRENT
AS $$
SELECT r.clock
FROM duly_dispatch_run r
WHERE r.mode = 'scheduled' AND NOT r.dry_run
  AND (r.organization_id IS NULL OR r.organization_id = organization)
  AND (r.duty_ids IS NULL OR duty = ANY (r.duty_ids))
  AND r.clock <= r.started_at
ORDER BY r.clock DESC
LIMIT 1
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
        NEW.dispatch_version := 0;
        RETURN NEW;
    END IF;
    NEW.dispatch_version := OLD.dispatch_version + 1;
    was := coalesce(duly_dispatchable(OLD.status, OLD.form, OLD.review_status), false);
    -- A change of what the duty owes (not of whether it is dispatchable) made
    -- on a day it had been dispatchable since its account's day: not paused
    -- since, paused after days it owed, or resumed before the change's day
    -- (the spans resumes opened). An account no run kept owes from the first
    -- run's origin, which only a run knows: every such change is marked, and
    -- the page asks the same of it against the origin (page_owed.sql).
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
            OR OLD.dispatch_paused_on IS NULL
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
    ELSIF is_now AND NOT was AND latest_day IS NULL AND OLD.dispatch_through IS NULL THEN
        -- Paused and resumed before any scheduled clock: the duty owes from
        -- the first run's origin as if never paused, and its row says so.
        NEW.dispatch_paused_on := NULL;
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


-- Resumed under 0016 from a pause on or before the account's day, not read
-- since, still dispatchable: the span the resume would open under 0017.
-- 9999-12-31 is a change no scheduled clock placed, which opens no span.
UPDATE duly_duty
SET dispatch_owed_between = datemultirange(daterange(dispatch_changed_on, NULL, '(]'))
WHERE dispatch_owed_between IS NULL
  AND dispatch_paused_on IS NOT NULL
  AND dispatch_through IS NOT NULL
  AND dispatch_paused_on <= dispatch_through
  AND dispatch_changed_on > dispatch_through
  AND dispatch_changed_on < date '9999-12-31'
  AND coalesce(duly_dispatchable(status, form, review_status), false);

-- Changed while dispatchable and never paused since the account's day
-- (or since the origin, for an account no run kept), not read since: under
-- 0016 the change left dispatch_changed_on alone, under 0017 nothing for an
-- account no run kept. Under 0017's trigger and this one such a row carries
-- dispatch_recast_on already, so only those rows gain it.
UPDATE duly_duty
SET dispatch_recast_on = dispatch_changed_on
WHERE dispatch_recast_on IS NULL
  AND dispatch_paused_on IS NULL
  AND dispatch_changed_on > coalesce(dispatch_through, date '0001-01-01')
  AND dispatch_changed_on < date '9999-12-31';
