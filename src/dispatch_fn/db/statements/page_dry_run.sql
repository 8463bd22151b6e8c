-- The owed tasks of one keyset page of dispatchable duties, dry:
-- page_write.sql's question without writing (which owed rows are not there
-- yet, and which duties those would advance), reported in the same one row
-- (store.PageResult).
--
-- Run from psql with each named placeholder replaced by a value, or
-- through psycopg as store.dispatch_page does: never prepared, so that every
-- page is planned with its own values and each null test on them folds away.
--
-- The run's schedules travel as arrays, read through scalar subqueries so the
-- planner sizes them as small sets of unknown length and hashes them instead
-- of sorting the whole page for a merge join (docs/adr/0002). The page's
-- bounds (%(after)s, %(upto)s; null: open) and the run's scope are bound
-- parameters too.
--
-- The CTEs from cadence to owed, and keeping, are page_owed.sql's, included
-- below as in page_write.sql; page_taken_ids.sql shares their head and page.
--
-- No coalesce on the cadence columns: every one but frequency and
-- holiday_calendar is NOT NULL with its default (migrations 0001, 0003), and
-- a null frequency or calendar means something.
-- duly:include page_owed
missing AS (
    -- One probe of the unique index per owed row, whatever the statistics say
    -- (ADR 0003): OFFSET 0 keeps the NOT EXISTS a correlated subplan
    -- rather than an anti-join the planner may turn into a nested loop over a
    -- scan of duly_task, and page_dry_run_plan.sql, run first in the page's
    -- transaction, takes the scan off the table, so the subplan's only path
    -- is the index with the owed row's key as its condition.
    SELECT o.organization_id, o.duty_id, o.period_key FROM owed o
    WHERE o.owes AND NOT EXISTS (
        SELECT 1 FROM duly_task t
        WHERE (t.organization_id, t.duty_id, t.owner_id, t.period_key)
            = (o.organization_id, o.duty_id, o.owner_id, o.period_key)
        OFFSET 0)
),
advancing AS (
    SELECT d.id, true AS advanced
    FROM duly_duty d,
         (SELECT organization_id, duty_id, max(period_key COLLATE "C") AS latest
          FROM missing GROUP BY organization_id, duty_id) i
    -- page_write.sql's key and never-regress test, word for word.
    WHERE (d.organization_id, d.id) = (i.organization_id, i.duty_id)
      AND (d.last_dispatched_period IS NULL
           OR (coalesce(duly_period_first_day(d.last_dispatched_period), '-infinity'::date),
               d.last_dispatched_period COLLATE "C")
            < (duly_period_first_day(i.latest), i.latest))
),
-- duly:include page_result
-- The page in one row (store.PageResult): its counts, and what a write would
-- insert, advance and keep.
SELECT c.*,
       (SELECT count(*) FROM missing) AS created,
       (SELECT count(*) FILTER (WHERE advanced) FROM advancing) AS advanced,
       (SELECT count(*) FILTER (WHERE keep) FROM keeping) AS kept
FROM page_counts c
