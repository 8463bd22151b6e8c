-- What one keyset page of dispatchable duties owes, and whose account
-- moves: the rule of docs/contract.md#account, spelled once. page_write.sql,
-- page_write_rerun.sql and page_dry_run.sql each include it where they say
-- `-- duly:include page_owed` (sql.statement_text expands the line) and go on
-- from `owed` and `keeping`: to insert, to probe first, or to count.
--
-- No coalesce on the cadence columns: every one but frequency and
-- holiday_calendar is NOT NULL with its default (migrations 0001, 0003), and
-- a null frequency or calendar means something.
WITH cadence AS (
    -- One row per group of duties the run planned (store.Group: a frequency,
    -- zone and lead bucket): its schedule, today in its zone, the catch-up
    -- horizon, the local day of the scheduled clock before the run and the
    -- first day of its first candidate (plan.Schedule.horizon, .origin, the
    -- first period's first day; null in a backfill), the widest lead it was
    -- planned for (store.Group.max_lead), and the widest UTC
    -- offset its zone has in minutes through offset_until
    -- (page_plan.widest_utc_offset: a local day begins no earlier than its
    -- midnight less it). Each group's weight, the candidate periods its
    -- schedule holds, travels apart as %(weights)s, a JSON object of
    -- frequency, then zone, then lead bucket.
    SELECT *
    FROM unnest((SELECT %(c_schedule)b::int[]), (SELECT %(c_frequency)b::text[]),
                (SELECT %(c_timezone)b::text[]), (SELECT %(c_lead_bucket)b::int[]),
                (SELECT %(c_today)b::date[]), (SELECT %(c_horizon)b::date[]),
                (SELECT %(c_origin)b::date[]), (SELECT %(c_first)b::date[]),
                (SELECT %(c_max_lead)b::int[]), (SELECT %(c_offset)b::int[]),
                (SELECT %(c_offset_until)b::date[]))
        AS c(schedule_no, frequency, timezone, lead_bucket, today, horizon, origin, first_day,
             max_lead, widest_offset, offset_until)
),
head AS NOT MATERIALIZED (
    -- plan.classify: only active, recurring, approved duties are dispatched;
    -- the partial index duly_duty_next_at (migration 0016) holds exactly them.
    -- The next %(size)s of them, in id order, with every duty sharing the
    -- last one's id: on a layout keyed by (organization_id, id) an id may
    -- repeat across organisations, and the next page starts after the id.
    SELECT d.id, d.organization_id, d.owner_id, d.business_unit_id, d.name, d.source,
           d.effective_from, d.effective_to, d.frequency, d.timezone,
           d.due_anchor, d.due_offset_days, d.due_offset_months, d.due_roll,
           d.holiday_calendar, d.lead_days, d.grace_days, d.last_dispatched_period,
           -- The duty's account (plan.Account, migration 0012).
           d.dispatch_through, d.dispatch_paused_on, d.dispatch_changed_on, d.dispatch_version,
           d.dispatch_next, d.dispatch_owed_between, d.dispatch_recast_on,
           -- plan.lead_bucket, the same rule (plan.LEAD_THRESHOLDS).
           width_bucket(d.lead_days, (SELECT %(lead_thresholds)b::int[])) AS lead_bucket,
-- duly:include page_afresh_owed
-- duly:include page_keys
    ORDER BY d.id
),
page AS (
    -- The head, cut short before the rows its duties can owe (each duty's
    -- candidate periods, its group's weight) pass %(page_rows)s: a page is
    -- bounded in rows whatever the window and the frequency, and always holds
    -- its first duty (docs/adr/0009). cut_after: the page was cut (the
    -- summary says so).
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
    SELECT (duty).*, cut
    FROM (SELECT duty, place, reach,
                 -- The page was cut: a duty after its last was left out.
                 bool_or(place > 1 AND reach > %(page_rows)s::bigint) OVER () AS cut
          FROM (SELECT head AS duty,
                       -- head is already in id order. Duties of one id (one in
                       -- each organisation that holds it) are peers: they share
                       -- a place and a reach, so a cut never falls between them.
                       dense_rank() OVER running AS place,
                       sum(w.weight) OVER running AS reach
                FROM head
                -- The weight is looked up, not joined, so rows keep their order.
                CROSS JOIN LATERAL (
                    SELECT coalesce((%(weights)s::jsonb -> head.frequency -> head.timezone
                                     ->> head.lead_bucket::text)::int, 0) AS weight) w
                WINDOW running AS (ORDER BY head.id RANGE UNBOUNDED PRECEDING)) ranked) weighed
    WHERE %(page_rows)s::bigint IS NOT NULL AND (place = 1 OR reach <= %(page_rows)s::bigint)
),
accepted_rule AS (
    -- The due rules (anchor, roll, calendar) the run judged and accepted
    -- (store.DueRule), whose calendars the roll holds: a refused one's duties
    -- were counted as faults before the pages. No calendar is '' with
    -- no_calendar true, so a duty naming the calendar '' (refused) is not
    -- taken for one with none.
    SELECT *
    FROM unnest((SELECT %(a_anchor)b::text[]), (SELECT %(a_roll)b::text[]),
                (SELECT %(a_calendar)b::text[]), (SELECT %(a_no_calendar)b::boolean[]))
        AS a(due_anchor, due_roll, holiday_calendar, no_calendar)
),
period AS (
    -- Each schedule's candidate periods (plan.Schedule): back to the catch-up
    -- horizon, on to the largest lead of the group, then the period after
    -- them (plan.Schedule.after). before: the previous period's first day.
    SELECT *
    FROM unnest((SELECT %(p_schedule)b::int[]), (SELECT %(p_key)b::text[]),
                (SELECT %(p_first)b::date[]), (SELECT %(p_last)b::date[]),
                (SELECT %(p_before)b::date[]))
        AS p(schedule_no, period_key, first_day, last_day, before)
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
    -- count towards the cursor and nothing else. So does one edited after
    -- the run planned (docs/contract.md#account): into a group it did not
    -- plan, a lead wider than its group's schedule reaches, or a due rule it
    -- did not judge. Its account stays as the edit left it, read by the next
    -- run: judged against a schedule too short, it would be moved past
    -- periods its lead opens; against an unknown rule, never rolled. The page
    -- returns the keys of all of them (page_result's unplaced): the run tells
    -- its faults from the duties edited since it planned.
    -- The columns read after this CTE, not page.*: placed is stored once
    -- and read twice, and storing a row costs for each column it carries
    -- (docs/performance-history.md#instructions).
    SELECT page.id, page.organization_id, page.owner_id, page.business_unit_id, page.name,
           page.source, page.effective_from, page.effective_to, page.due_anchor,
           page.due_offset_days, page.due_offset_months, page.due_roll, page.holiday_calendar,
           page.lead_days, page.grace_days, page.cut_after, c.schedule_no, c.today, c.horizon,
           c.widest_offset, c.offset_until,
           page.dispatch_through AS through, page.dispatch_paused_on AS paused_on,
           page.dispatch_owed_between AS owed_between,
           acct.since,
           page.dispatch_version AS version, page.dispatch_next AS next_was,
           page.last_dispatched_period AS ldp_was,
           marks.fresh,
           (page.dispatch_paused_on IS NOT NULL OR page.dispatch_changed_on IS NOT NULL
            OR page.afresh_owed OR %(rejudge)s::boolean) AS marked,
           marks.changed_day,
           -- Changed after days it had been dispatchable since its account's
           -- day (the trigger's dispatch_recast_on, migrations 0017, 0018):
           -- what the old cadence or owner owed then is not spelled by the new
           -- one. The trigger asked that of a kept account; of one no run kept,
           -- whose day is the origin, the page asks it: not paused since, paused
           -- after it, or owed again (a resume's span, or the days a window
           -- edit's old window held, migration 0019) after it by the change's day.
           -- A kept account's change day is on or after its day: a move to a
           -- zone whose day is behind brings both back to that day (0021).
           coalesce(CASE WHEN page.dispatch_through IS NULL
                         THEN page.dispatch_recast_on > c.origin
                         ELSE page.dispatch_recast_on >= page.dispatch_through END
                    AND (page.dispatch_through IS NOT NULL
                         OR page.dispatch_paused_on IS NULL
                         OR page.dispatch_paused_on > c.origin
                         OR page.dispatch_owed_between
                            && datemultirange(daterange(c.origin, page.dispatch_recast_on,
                                                        '(]'))),
                    false)
               AS changed_while_owed,
           coalesce(c.today IS NULL
                    OR c.today BETWEEN coalesce(page.effective_from, '-infinity'::date)
                                   AND coalesce(page.effective_to, 'infinity'::date)
                    -- A window that closed after the account's day, or on a
                    -- change's (or, no run kept, the origin's): what became
                    -- owed in it, and the current period that change owes,
                    -- is still owed (plan.window_closed_behind); so is the
                    -- account's day a judgement afresh owed by the previous
                    -- run is made on (new rules owe as of the run's day).
                    OR c.today > page.effective_to
                       AND (acct.since < page.effective_to OR marks.fresh <= page.effective_to),
                    false)
               AS in_window,
           coalesce(c.today > page.effective_to, false) AS closed,
           coalesce(c.today < page.effective_from, false) AS early,
           -- An account whose day lies before the first candidate (the period
           -- before the horizon's), bounded since by a pause, a span or its
           -- window's end, may have let older periods lapse than the
           -- candidates show: its account as read, for the run to judge those
           -- itself (plan.lapsed_before_candidates). Null for every other duty.
           CASE WHEN c.today IS NOT NULL
                     AND acct.since < c.first_day - 1
                     AND (page.dispatch_paused_on > acct.since
                          OR page.dispatch_owed_between IS NOT NULL
                          OR page.effective_to > acct.since)
                THEN jsonb_build_object(
                         'organization_id', page.organization_id, 'id', page.id,
                         'through', page.dispatch_through, 'paused_on', page.dispatch_paused_on,
                         'changed_on', page.dispatch_changed_on, 'origin', c.origin,
                         'owed_between', (SELECT jsonb_agg(jsonb_build_array(lower(r), upper(r)))
                                          FROM unnest(page.dispatch_owed_between) r))::text
           END AS lapse_probe
    FROM page
    LEFT JOIN cadence c
      ON (c.frequency, c.timezone, c.lead_bucket)
       = (page.frequency COLLATE "C", page.timezone COLLATE "C", page.lead_bucket)
     AND (c.today IS NULL OR page.lead_days <= c.max_lead)
     AND (page.due_anchor, page.due_roll, coalesce(page.holiday_calendar, ''),
          page.holiday_calendar IS NULL) IN (SELECT * FROM accepted_rule)
     -- The ranges periods.check_due_rule and periods.check_grace_days allow
     -- (due_rules.sql counts the duties outside them as faults).
     AND duly_due_rule_in_range(page.due_anchor, page.due_offset_days,
                                page.due_offset_months, page.grace_days)
    -- The account's days, each named once (plan.Account). since, owed_verdict's:
    -- the account's day; no account kept, the origin (the duty existed before
    -- the first run that keeps accounts; a pause bounds it), or a change a
    -- scoped run's clock placed before it. afresh: judged afresh, the
    -- account's own day (plan.account_judged: owed by the previous run, or
    -- under rules new at this run while its window holds today).
    CROSS JOIN LATERAL (
        SELECT coalesce(page.dispatch_through, least(c.origin, page.dispatch_changed_on)) AS since,
               CASE WHEN page.afresh_owed
                         OR %(rejudge)s::boolean AND NOT coalesce(c.today > page.effective_to, false)
                    THEN page.dispatch_through END AS afresh) acct
    -- fresh, owed_verdict's (Account.fresh): a change's day, else, no account
    -- kept, the origin's, else the afresh day. changed_day: the same but the
    -- origin's: a period that begins after it, which its lead opened by then,
    -- is owed as if it became owed then (owed_verdict's opened).
    CROSS JOIN LATERAL (
        SELECT coalesce(page.dispatch_changed_on,
                        CASE WHEN page.dispatch_through IS NULL THEN c.origin END,
                        acct.afresh) AS fresh,
               coalesce(page.dispatch_changed_on, acct.afresh) AS changed_day) marks
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
    -- have no zone (docs/performance-history.md#compliance-page).
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
      -- plan.lead_bucket), and periods over by today that began, or whose
      -- window opened, after the account's day: only those can have become
      -- owed since (a period becomes owed on or before its first day, or as
      -- the duty enters its window).
      AND (pl.today IS NULL
           OR (p.last_day >= pl.today AND p.first_day <= greatest(pl.today, pl.today + pl.lead_days))
           OR (p.last_day < pl.today
               AND greatest(p.first_day, coalesce(pl.effective_from, '-infinity'::date))
                   > least(pl.since, pl.fresh))
           -- And the period after the last not over, never owed yet: the day
           -- it becomes owed is the account's next day (keeping). Only a lead
           -- moves that day off its first day, the bound keeping computes
           -- without it.
           OR (pl.lead_days > 0 AND p.first_day > pl.today + pl.lead_days
               AND p.before <= pl.today + pl.lead_days))
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
    -- The candidates that count: owed now (owes), over and lapsed, becoming
    -- owed after today (later), and every one not over (they bound the
    -- account's next day: the periods after them start after the last).
    -- The consumers filter on the flags.
    SELECT organization_id, id AS duty_id, owner_id, business_unit_id, name AS subject, source,
           period_key, due_date, due_date - lead_days AS visible_from,
           due_date + grace_days AS late_after, became, last_day, lead_days, today,
           -- Over, and became owed on or before the horizon: counted, never
           -- created (plan.NotOwed.BEYOND_HORIZON).
           windowed AND now_owed AND lapses AS lapsed,
           -- Not owed yet: it becomes owed after today, on became (the
           -- account's next day, never created by this run).
           windowed AND coalesce(became > today, false) AS later,
           -- Owed now, and created unless it exists.
           windowed AND now_owed AND NOT lapses AS owes
    FROM (SELECT *,
                 -- plan.Cadence.window_day: after the period, the window holds
                 -- the period's last day; otherwise the due date. And it became
                 -- owed by the window's last day (plan.owed_in_window): one
                 -- whose due date a roll moved back into the window became
                 -- owed outside it if after that day.
                 CASE WHEN due_anchor = 'after_period_end' THEN last_day ELSE due_date END
                     BETWEEN coalesce(effective_from, '-infinity'::date)
                         AND coalesce(effective_to, 'infinity'::date)
                     AND became <= coalesce(effective_to, 'infinity'::date) AS windowed,
                 -- plan.owed_verdict: the period became owed by today, after the
                 -- account's day (and, paused since, by the pause's or in a span a
                 -- resume opened after it, migration 0016), or, for a
                 -- duty that changed or whose account no run kept, it became
                 -- owed by the fresh day and is still current or later, or
                 -- begins after a change's (its lead opened it by then); what
                 -- became owed after the fresh day is the account's, so a pause
                 -- after a change that stays (migration 0024) still bounds it; unless
                 -- today is before the account's day (what it could owe, the
                 -- account says is done) or the fresh day (the edit came after
                 -- the run's clock; 9999-12-31: no scheduled clock placed it,
                 -- so it counts for every run). Dates only: the planner turned the
                 -- clock into a local day once per group (ADR 0001's rule, not
                 -- AT TIME ZONE's).
                 coalesce(today IS NULL
                          OR (became <= today
                              AND ((became > since AND (paused_on IS NULL OR became <= paused_on
                                                        OR coalesce(owed_between @> became, false)))
                                   OR became <= fresh
                                      AND ((last_day >= today
                                            AND (fresh <= today OR fresh = date '9999-12-31'))
                                           OR first_day > changed_day AND changed_day <= today)
                                      AND (through IS NULL OR through <= today)
                                      -- The origin is no change: owed only if
                                      -- the duty owed as the period became owed.
                                      AND (changed_day IS NOT NULL OR paused_on IS NULL
                                           OR became <= paused_on
                                           OR coalesce(owed_between @> became, false)))), false)
                     AS now_owed,
                 -- Over, and became owed on or before the horizon; one that
                 -- begins after a change's day, which its lead opened by then,
                 -- became owed as of that day (plan.owed_verdict).
                 coalesce(last_day < today
                          AND CASE WHEN first_day > changed_day THEN greatest(became, changed_day)
                                   ELSE became END <= horizon, false) AS lapses
          -- plan.became_owed_on: never before its lead reaches it (a due date
          -- rolled back before the period would be owed before it is a
          -- candidate), nor before the window's first day: a period its lead
          -- opened before the duty entered its window becomes owed then.
          FROM (SELECT *, greatest(least(first_day, greatest(due_date - lead_days,
                                                             first_day - greatest(lead_days, 0))),
                                   coalesce(effective_from, '-infinity'::date)) AS became
                FROM dated) b) dated
    WHERE windowed AND (now_owed OR became > today) OR last_day >= today
),
keeping AS (
    -- Every duty of the page the run judged at its clock (its cadence
    -- accepted) and what it writes to its account. keep: the account moves (to
    -- today, marks cleared): the duty is in its window and owed something, or
    -- carries a mark, or no run kept it yet. One in its window that owed
    -- nothing keeps its day: the next run owes from it all the same.
    -- next: the first day a run could owe it anything or move its account
    -- (migration 0014): the earliest day a later candidate becomes owed, or
    -- beyond the candidates; outside its window, the window's first day, or
    -- never once the window is over (after a run that kept its account past
    -- it). A duty is written when it keeps its account or its next day moves.
    -- A run at a clock older than the account's day leaves it as it is
    -- (docs/contract.md#account).
    -- lags: periods that became owed before the horizon went uncreated (and
    -- are not there: a backfill ahead of the runs may have created them),
    -- seen among the candidates (lapsed: the schedule holds the period
    -- before the horizon's for this, plan.Schedule): counted as beyond_horizon.
    -- The page's duties and their owed rows are grouped by duty, not joined:
    -- the planner knows the size of neither CTE and, on a duly_duty never
    -- analysed, guesses a page of one duty; a join it guesses that small is a
    -- nested loop that reads every owed row once per duty (20,387,185 rows,
    -- 4.5 to 7 s, for a page of 6,756 duties: tests/db/test_plans_unanalysed.py).
    -- A grouping reads each row once, whatever the guess. judged: a duty of
    -- the first branch, which its WHERE keeps; the owed rows of any other duty
    -- are left out. A duty's today, version and days are its one row's there.
    SELECT organization_id, id, max(today) AS today, max(version) AS version,
           bool_or(keep) AS keep, bool_or(lags) AS lags, max(next_was) AS next_was,
           max(lapse_probe) AS lapse_probe, max(ldp_was) AS ldp_was,
           max(widest_offset) AS widest_offset, max(offset_until) AS offset_until,
           -- Outside its window, the window's day; else the earliest day a
           -- later candidate becomes owed, or one after the candidates could:
           -- none starts before the day after the last candidate, nor becomes
           -- owed more than the lead before it starts (plan.became_owed_on),
           -- nor by today (it would be a candidate); and never after the day
           -- after its window ends, when a run that reads it moves its
           -- account (closed) as one that passed it over would not.
           -- A run at a clock later than the wall clock when it started (a
           -- manual run at a future clock) creates what it owes and counts
           -- what lapsed, but keeps no account: the scheduled runs before
           -- that clock still owe their days.
           CASE WHEN %(keeps_accounts)s::boolean
                THEN coalesce(max(fixed),
                              least(min(soon), greatest(max(today) + 1, max(bound))))
           END AS next
    FROM (SELECT pl.organization_id, pl.id, pl.today, pl.version,
                 %(keeps_accounts)s::boolean
                     AND pl.in_window AND (pl.through IS NULL OR pl.marked OR pl.closed) AS keep,
                 false AS lags, true AS judged, pl.next_was,
                 CASE WHEN pl.effective_to >= pl.today AND pl.effective_to < date '9999-12-31'
                      THEN pl.effective_to + 1 END AS soon,
                 CASE WHEN pl.in_window THEN pl.lapse_probe END AS lapse_probe,
                 -- (An empty window, its start after its end, ends first.)
                 CASE WHEN pl.closed THEN date '9999-12-31'
                      WHEN pl.early THEN least(pl.effective_from,
                                               CASE WHEN pl.effective_to < date '9999-12-31'
                                                    THEN pl.effective_to + 1 END) END AS fixed,
                 NULL::date AS bound, pl.widest_offset, pl.offset_until, pl.ldp_was
          FROM placed pl
          WHERE pl.schedule_no IS NOT NULL AND pl.today IS NOT NULL
            AND (pl.through IS NULL OR pl.through <= pl.today)
          UNION ALL
          SELECT o.organization_id, o.duty_id, NULL, NULL,
                 %(keeps_accounts)s::boolean AND (o.owes OR o.lapsed),
                 -- Lapsed and not there: a backfill may have created it.
                 CASE WHEN o.lapsed
                      THEN NOT EXISTS (SELECT FROM duly_task t
                                       WHERE t.organization_id = o.organization_id
                                         AND t.duty_id = o.duty_id
                                         AND t.owner_id = o.owner_id
                                         AND t.period_key = o.period_key)
                      ELSE false END,
                 false,
                 NULL, CASE WHEN o.later THEN o.became END, NULL, NULL,
                 CASE WHEN o.last_day >= o.today
                      THEN o.last_day + 1 - greatest(o.lead_days, 0) END,
                 NULL, NULL, NULL
          FROM owed o) k
    GROUP BY organization_id, id
    HAVING bool_or(judged)
),
