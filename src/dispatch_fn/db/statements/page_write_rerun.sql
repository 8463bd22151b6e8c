-- page_write.sql for a page whose owed tasks mostly exist already (a
-- re-run: the same clock dispatched again, or one whose pages an earlier link
-- of its chain wrote): the same page, the same one-row result
-- (store.PageResult), the same rows written. page_plan.probes_first decides
-- which of the two a page runs.
--
-- It differs in one place: before the INSERT, each owed row is looked up in
-- duly_task_dispatch_identity and only those absent go on to be inserted, so
-- a page that owes nothing new builds no tuple and makes no speculative
-- insertion (docs/performance.md#server-cpu has the figures). Idempotency
-- stays the constraint's: ON CONFLICT DO NOTHING still refuses what a
-- concurrent run inserted since the probe looked. On a page whose rows are
-- all new the probe finds nothing and only costs its lookups, so running this
-- statement where page_write.sql was due costs time, never a row. (A task
-- deleted by another transaction while the page runs, which no run does,
-- is still seen by the probe and is re-created by the next run rather than
-- this one.)
--
-- Everything else (placeholders, planning, the CTEs from cadence to owed,
-- word for word; tests/db/test_statements.py holds them together) is
-- page_write.sql's, and so are the comments that explain it there.
WITH cadence AS (
    -- One row per group of duties the run planned (store.Group: a frequency,
    -- zone and lead bucket): its schedule, today in its zone, the catch-up
    -- horizon, the local day of the scheduled clock before the run and the
    -- first day of its first candidate (plan.Schedule.horizon, .origin, the
    -- first period's first day; null in a backfill). Each group's
    -- weight, the candidate periods its schedule holds (summed over a catch-up
    -- statement's clocks, which add one cadence each), travels apart as
    -- %(weights)s, a JSON object of frequency, then zone, then lead bucket.
    SELECT *
    FROM unnest((SELECT %(c_schedule)b::int[]), (SELECT %(c_frequency)b::text[]),
                (SELECT %(c_timezone)b::text[]), (SELECT %(c_lead_bucket)b::int[]),
                (SELECT %(c_today)b::date[]), (SELECT %(c_horizon)b::date[]),
                (SELECT %(c_origin)b::date[]), (SELECT %(c_first)b::date[]))
        AS c(schedule_no, frequency, timezone, lead_bucket, today, horizon, origin, first_day)
),
head AS NOT MATERIALIZED (
    -- plan.classify: only active, recurring, approved duties are dispatched;
    -- the partial index duly_duty_dispatchable_approved holds exactly them.
    -- The next %(size)s of them, in id order.
    SELECT d.id, d.organization_id, d.owner_id, d.business_unit_id, d.name, d.source,
           d.effective_from, d.effective_to, d.frequency, d.timezone,
           d.due_anchor, d.due_offset_days, d.due_offset_months, d.due_roll,
           d.holiday_calendar, d.lead_days, d.grace_days,
           -- The duty's account (plan.Account, migration 0012).
           d.dispatch_through, d.dispatch_paused_on, d.dispatch_changed_on, d.dispatch_version,
           -- plan.lead_bucket, the same rule (plan.LEAD_THRESHOLDS).
           width_bucket(d.lead_days, (SELECT %(lead_thresholds)b::int[])) AS lead_bucket
    FROM duly_duty d
    WHERE duly_dispatchable(d.status, d.form, d.review_status)
      -- The page's keyset range (a null bound is open) within the run's scope.
      AND (%(after)s::text IS NULL OR d.id > %(after)s)
      AND (%(upto)s::text IS NULL OR d.id <= %(upto)s)
      AND duly_in_scope(d.id, d.organization_id, %(organization_id)s::text,
                        %(duty_ids)s::text[], %(resume_after)s::text)
      -- Duties the run set aside while settling a failing page (ADR 0003).
      AND d.id <> ALL(%(excluded)s::text[])
    ORDER BY d.id
    LIMIT %(size)s
),
page AS (
    -- The head, cut short before the rows its duties can owe (each duty's
    -- candidate periods, its group's weight) pass %(page_rows)s: a page is
    -- bounded in rows whatever the window and the frequency, and always holds
    -- its first duty (docs/adr/0009). cut_after: the duty after this one was
    -- cut (the summary says whether the page was).
    --
    -- A null %(page_rows)s takes the head whole: the run sends null wherever a
    -- page of its heaviest duties could not pass the budget, as on most
    -- scheduled runs (store.PageStatement.budget, page_size). Only one branch
    -- then runs, the other's one-time filter being false once the value is
    -- bound: weighing is a window over the page's wide rows, so it is paid
    -- only where a page could be cut.
    SELECT head.*, false AS cut_after
    FROM head
    WHERE %(page_rows)s::bigint IS NULL
    UNION ALL
    SELECT (duty).*, coalesce(reach + next_weight > %(page_rows)s::bigint, false)
    FROM (SELECT head AS duty,
                 -- One window, one pass: head is already in id order.
                 row_number() OVER running AS place,
                 sum(w.weight) OVER running AS reach,
                 lead(w.weight) OVER running AS next_weight
          FROM head
          -- The weight is looked up, not joined, so rows keep their order.
          CROSS JOIN LATERAL (
              SELECT coalesce((%(weights)s::jsonb -> head.frequency -> head.timezone
                               ->> head.lead_bucket::text)::int, 0) AS weight) w
          WINDOW running AS (ORDER BY head.id ROWS UNBOUNDED PRECEDING)) weighed
    WHERE %(page_rows)s::bigint IS NOT NULL AND (place = 1 OR reach <= %(page_rows)s::bigint)
),
refused_rule AS (
    -- The due rules (anchor, roll, calendar; '' for none) the run refused
    -- (store.DueRule): their duties were counted as faults before the pages.
    SELECT *
    FROM unnest((SELECT %(x_anchor)b::text[]), (SELECT %(x_roll)b::text[]),
                (SELECT %(x_calendar)b::text[]))
        AS x(due_anchor, due_roll, holiday_calendar)
),
period AS (
    -- Each schedule's candidate periods (plan.Schedule): back to the catch-up
    -- horizon, on to the largest lead of the group.
    SELECT *
    FROM unnest((SELECT %(p_schedule)b::int[]), (SELECT %(p_key)b::text[]),
                (SELECT %(p_first)b::date[]), (SELECT %(p_last)b::date[]))
        AS p(schedule_no, period_key, first_day, last_day)
),
roll AS (
    -- Every day that is not a business day of a calendar in use ('' is the
    -- Saturday/Sunday weekend of a null calendar), with the business days
    -- either side of it: plan.Cadence.due_date's roll, as a lookup.
    SELECT *
    FROM unnest((SELECT %(r_calendar)b::text[]), (SELECT %(r_day)b::date[]),
                (SELECT %(r_following)b::date[]), (SELECT %(r_preceding)b::date[]))
        AS r(holiday_calendar, day, following, preceding)
),
placed AS (
    -- Every duty of the page. Those whose group or due rule was refused, or
    -- whose offsets or grace lie outside what periods.check_due_rule allows
    -- (counted as faults before the pages), keep a null schedule_no: they
    -- count towards the cursor and nothing else.
    -- The columns read after this CTE, not page.*: placed is stored once
    -- and read twice, and storing a row costs for each column it carries
    -- (docs/performance.md#instructions).
    SELECT page.id, page.organization_id, page.owner_id, page.business_unit_id, page.name,
           page.source, page.effective_from, page.effective_to, page.due_anchor,
           page.due_offset_days, page.due_offset_months, page.due_roll, page.holiday_calendar,
           page.lead_days, page.grace_days, page.cut_after, c.schedule_no, c.today, c.horizon,
           page.dispatch_through AS through, page.dispatch_paused_on AS paused_on,
           -- Periods owed after the account's day reach back before the first
           -- candidate: what lies there is uncounted but may have lapsed.
           coalesce(page.dispatch_through + 1 < c.first_day, false) AS lags,
           -- plan.owed_verdict's since: no account kept and no edit placed,
           -- the duty existed before the first run the ledger holds.
           coalesce(page.dispatch_through, c.origin) AS since,
           page.dispatch_version AS version,
           -- plan.owed_verdict's fresh day: a change's, else, for an account no
           -- run kept yet, the scheduled clock's before the run; under rules
           -- that changed since the previous run, the account's own day
           -- (plan.Account.rejudged).
           coalesce(page.dispatch_changed_on,
                    CASE WHEN page.dispatch_through IS NULL THEN c.origin END,
                    CASE WHEN %(rejudge)s::boolean THEN page.dispatch_through END) AS fresh,
           (page.dispatch_paused_on IS NOT NULL OR page.dispatch_changed_on IS NOT NULL
            OR %(rejudge)s::boolean) AS marked,
           -- Changed while periods after its account's day were owed: what the
           -- old cadence or owner owed then is not spelled by the new one.
           coalesce(page.dispatch_paused_on IS NULL
                    AND page.dispatch_changed_on > page.dispatch_through
                    AND page.dispatch_changed_on < date '9999-12-31', false)
               AS changed_while_owed,
           (c.today IS NULL OR c.today BETWEEN coalesce(page.effective_from, '-infinity'::date)
                                           AND coalesce(page.effective_to, 'infinity'::date))
               AS in_window
    FROM page
    LEFT JOIN cadence c
      ON (c.frequency, c.timezone, c.lead_bucket)
       = (page.frequency COLLATE "C", page.timezone COLLATE "C", page.lead_bucket)
     AND (page.due_anchor, page.due_roll, coalesce(page.holiday_calendar, ''))
         NOT IN (SELECT * FROM refused_rule)
     -- The ranges periods.check_due_rule and periods.check_grace_days allow
     -- (due_rules.sql counts the duties outside them as faults).
     AND duly_due_rule_in_range(page.due_anchor, page.due_offset_days,
                                page.due_offset_months, page.grace_days)
),
unrolled AS (
    -- periods.due_date_for in bulk, before the roll. period_start and
    -- period_end: the anchor day plus the offset, clamped into the period (the
    -- offset is clamped first, so no offset can push a date out of range: no
    -- period is longer than 366 days). after_period_end: the last day moved
    -- on whole months (month-end stays month-end, as dates.add_months: the
    -- first of the next month moved on, less a day), plus the days; not
    -- clamped. Months are counted on timestamp, never timestamptz: a date cast
    -- to timestamptz looks the session's zone up for each row, for dates that
    -- have no zone (docs/performance.md#compliance-page).
    SELECT pl.*, p.period_key, p.first_day, p.last_day,
           CASE pl.due_anchor
               WHEN 'period_start' THEN least(greatest(
                   p.first_day + least(greatest(pl.due_offset_days, -400), 400),
                   p.first_day), p.last_day)
               WHEN 'period_end' THEN least(greatest(
                   p.last_day + least(greatest(pl.due_offset_days, -400), 400),
                   p.first_day), p.last_day)
               ELSE CASE WHEN date_trunc('month', (p.last_day + 1)::timestamp) = p.last_day + 1
                         THEN (p.last_day + 1
                               + make_interval(months => pl.due_offset_months))::date - 1
                         ELSE (p.last_day + make_interval(months => pl.due_offset_months))::date
                    END + pl.due_offset_days
           END AS unrolled
    FROM placed pl
    JOIN period p USING (schedule_no)
    WHERE pl.schedule_no IS NOT NULL AND pl.in_window
      -- The duty's own candidates (docs/contract.md#account): periods not
      -- over that start by today plus its lead (the schedule was planned for
      -- the largest lead in its group, whose leads share one bucket:
      -- plan.lead_bucket), and periods over by today that began after the
      -- account's day: only those can have become owed since (a period
      -- becomes owed on or before its first day).
      AND (pl.today IS NULL
           OR (p.last_day >= pl.today AND p.first_day <= greatest(pl.today, pl.today + pl.lead_days))
           OR (p.last_day < pl.today AND p.first_day > least(pl.since, pl.fresh)))
    -- A fence: flattened into dated, the undated due date would be computed
    -- again for the roll's key and for each use in the roll's CASE.
    OFFSET 0
),
dated AS (
    -- The roll, applied last (periods.due_date_for): a business day stays;
    -- modified_following takes the next business day unless that is in a
    -- later month, then the previous one.
    SELECT u.*,
           CASE WHEN r.day IS NULL THEN u.unrolled
                WHEN u.due_roll = 'following' THEN r.following
                WHEN u.due_roll = 'preceding' THEN r.preceding
                WHEN date_trunc('month', r.following::timestamp)
                   = date_trunc('month', u.unrolled::timestamp)
                    THEN r.following
                ELSE r.preceding
           END AS due_date
    FROM unrolled u
    -- A duty that does not roll joins on a null day, which matches nothing,
    -- rather than on its due date with a filter that refuses the match after.
    LEFT JOIN roll r
      ON r.day = CASE WHEN u.due_roll <> 'none' THEN u.unrolled END
     AND r.holiday_calendar = coalesce(u.holiday_calendar, '') COLLATE "C"
    -- A fence: flattened into owed, the due date would be computed once per
    -- use (four times per candidate period).
    OFFSET 0
),
owed AS (
    SELECT organization_id, id AS duty_id, owner_id, business_unit_id, name AS subject, source,
           period_key, due_date, due_date - lead_days AS visible_from,
           due_date + grace_days AS late_after,
           -- Over, and became owed on or before the horizon: counted, never
           -- created (plan.NotOwed.BEYOND_HORIZON).
           coalesce(last_day < today AND became <= horizon, false) AS lapsed
    FROM (SELECT *, least(first_day, due_date - lead_days) AS became FROM dated) dated
    -- plan.Cadence.window_day: after the period, the window holds the period's
    -- last day; otherwise the due date.
    WHERE CASE WHEN due_anchor = 'after_period_end' THEN last_day ELSE due_date END
              BETWEEN coalesce(effective_from, '-infinity'::date)
                  AND coalesce(effective_to, 'infinity'::date)
      -- plan.owed_verdict: the period became owed by today, after the
      -- account's day (and, paused since, by the pause's), or, for a duty
      -- that changed or whose account no run kept, it is still current or
      -- later or became owed after the fresh day. Dates only: the planner
      -- turned the clock into a local day once per group (ADR 0001's rule,
      -- not AT TIME ZONE's).
      AND (today IS NULL
           OR (became <= today
               AND ((became > since AND (paused_on IS NULL OR became <= paused_on))
                    OR (last_day >= today AND fresh IS NOT NULL) OR became > fresh)))
),
inserted AS (
    INSERT INTO duly_task (organization_id, duty_id, owner_id, business_unit_id, subject, source,
                           period_key, due_date, visible_from, late_after)
    SELECT o.organization_id, o.duty_id, o.owner_id, o.business_unit_id, o.subject, o.source,
           o.period_key, o.due_date, o.visible_from, o.late_after
    FROM owed o
    -- The probe: a row the unique index already holds is dropped here, for
    -- the price of one index lookup, instead of being built as a heap tuple
    -- and refused by a speculative insertion. It only filters: a row another
    -- run inserts after this statement's snapshot is still refused by the
    -- constraint below, exactly as page_write.sql's would be.
    WHERE NOT o.lapsed AND NOT EXISTS (
        SELECT 1 FROM duly_task t
        WHERE (t.organization_id, t.duty_id, t.owner_id, t.period_key)
            = (o.organization_id, o.duty_id, o.owner_id, o.period_key))
    ORDER BY duty_id COLLATE "C", period_key COLLATE "C"
    ON CONFLICT ON CONSTRAINT duly_task_dispatch_identity DO NOTHING
    RETURNING organization_id, duty_id, period_key
),
keeping AS (
    -- Every duty of the page the run judged at its clock (in its window, its
    -- cadence accepted) whose account moves: it owed something, or carries
    -- a mark, or no run kept it yet. One that owed nothing keeps its day: the
    -- next run owes from it all the same, and no row is written for nothing.
    -- A run at a clock older than the account's day leaves it as it is
    -- (docs/contract.md#account).
    -- lags: periods that became owed before the horizon went uncreated,
    -- seen among the candidates (lapsed) or older than them (placed.lags):
    -- counted as beyond_horizon.
    SELECT pl.organization_id, pl.id, pl.today, pl.version,
           (pl.through IS NULL OR pl.marked OR o.duty_id IS NOT NULL) AS keep,
           (pl.lags OR coalesce(o.lapsed, false)) AS lags
    FROM placed pl
    LEFT JOIN (SELECT organization_id, duty_id, bool_or(lapsed) AS lapsed
               FROM owed GROUP BY organization_id, duty_id) o
      ON (o.organization_id, o.duty_id) = (pl.organization_id, pl.id)
    WHERE pl.schedule_no IS NOT NULL AND pl.in_window AND pl.today IS NOT NULL
      AND (pl.through IS NULL OR pl.through <= pl.today)
),
advanced AS (
    -- One UPDATE per duty: last_dispatched_period and the account together
    -- (a row updated twice in one statement keeps one of the two). The
    -- organisation is part of the duty's key: on a layout partitioned by it
    -- (docs/adr/0005) the only index on id is (organization_id, id).
    -- The account is written only if no edit committed since the page read
    -- the row: dispatch_version is re-checked against the newest row version
    -- when a concurrent edit moved it first, so the run's bookkeeping never
    -- overwrites the edit's marks (the next run reads the edit).
    UPDATE duly_duty d
    SET last_dispatched_period = CASE WHEN (u.latest IS NOT NULL
                 AND (d.last_dispatched_period IS NULL
                      OR (coalesce(duly_period_first_day(d.last_dispatched_period), '-infinity'::date),
                          d.last_dispatched_period COLLATE "C")
                       < (duly_period_first_day(u.latest), u.latest)))
                                      THEN u.latest ELSE d.last_dispatched_period END,
        dispatch_through = CASE WHEN u.keep AND u.version = d.dispatch_version
                                THEN greatest(d.dispatch_through, u.today)
                                ELSE d.dispatch_through END,
        dispatch_paused_on = CASE WHEN u.keep AND u.version = d.dispatch_version THEN NULL
                                  ELSE d.dispatch_paused_on END,
        dispatch_changed_on = CASE WHEN u.keep AND u.version = d.dispatch_version THEN NULL
                                   ELSE d.dispatch_changed_on END
    FROM (SELECT coalesce(k.organization_id, i.organization_id) AS organization_id,
                 coalesce(k.id, i.duty_id) AS id, k.today, k.version,
                 coalesce(k.keep, false) AS keep, i.latest
          FROM (SELECT * FROM keeping WHERE keep) k
          FULL JOIN (SELECT organization_id, duty_id, max(period_key COLLATE "C") AS latest
                     FROM inserted GROUP BY organization_id, duty_id) i
            ON (i.organization_id, i.duty_id) = (k.organization_id, k.id)) u
    WHERE (d.organization_id, d.id) = (u.organization_id, u.id)
      AND ((u.latest IS NOT NULL
                 AND (d.last_dispatched_period IS NULL
                      OR (coalesce(duly_period_first_day(d.last_dispatched_period), '-infinity'::date),
                          d.last_dispatched_period COLLATE "C")
                       < (duly_period_first_day(u.latest), u.latest)))
           OR (u.keep AND u.version = d.dispatch_version))
    -- Read after the update: the key just inserted is the duty's latest
    -- exactly when this statement moved it there.
    RETURNING d.id, coalesce(d.last_dispatched_period = u.latest, false) AS advanced,
              u.keep AND u.version = d.dispatch_version AS kept
)
-- The page in one row, its columns named as store.PageResult's fields.
--
-- Each CTE is scanned once. max(id) is taken in the database's own collation,
-- the one the page's ORDER BY used, so it is the next cursor. nothing_due (in
-- its window, yet owed nothing) is counted by difference: an anti-join between
-- two CTEs is planned blind, as a nested loop. Its DISTINCT sorts the page's
-- owed rows; in "C" that is a byte comparison, where a linguistic default
-- collation (such as en_US.UTF-8) would call strcoll for each, for the same
-- count. cut: the row budget ended the page before its size did (the page
-- CTE), so the range goes on after upto however few duties the page held.
SELECT d.upto, d.page_rows AS rows, d.duties, d.outside_window,
       d.in_window - o.owing AS nothing_due, o.owed,
       (SELECT count(*) FROM inserted) AS created,
       (SELECT count(*) FILTER (WHERE advanced) FROM advanced) AS advanced,
       (SELECT count(*) FILTER (WHERE lags) FROM keeping) AS lapsed, d.changed, (SELECT count(*) FILTER (WHERE kept) FROM advanced) AS kept,
       d.cut
FROM (SELECT max(id) AS upto,
             count(*) AS page_rows,
             coalesce(bool_or(cut_after), false) AS cut,
             count(schedule_no) AS duties,
             count(*) FILTER (WHERE schedule_no IS NOT NULL AND NOT in_window) AS outside_window,
             count(*) FILTER (WHERE schedule_no IS NOT NULL AND in_window) AS in_window,
             count(*) FILTER (WHERE schedule_no IS NOT NULL AND changed_while_owed
                              AND today IS NOT NULL) AS changed
      FROM placed) d,
     (SELECT count(*) FILTER (WHERE NOT lapsed) AS owed,
             count(DISTINCT duty_id COLLATE "C") FILTER (WHERE NOT lapsed) AS owing
      FROM owed) o
