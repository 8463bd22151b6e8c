-- The ids of the duties one page statement (page_write.sql, page_dry_run.sql)
-- takes for the same parameters, in page order, and nothing else: the same
-- head and page CTEs, word for word, without what the page owes. For a page
-- the run settles by halves because its statement failed or ran out of time
-- (ADR 0003, 0009): the same duties, cut by the same row budget.
-- Run from psql with each named placeholder replaced by a value, or
-- through psycopg as store.page_taken_ids does.
WITH head AS NOT MATERIALIZED (
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
)
SELECT id FROM page ORDER BY id
