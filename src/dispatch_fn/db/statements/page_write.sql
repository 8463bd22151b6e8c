-- The owed tasks of one keyset page of dispatchable duties: insert them,
-- advance last_dispatched_period, and report the page in one row
-- (store.PageResult).
--
-- Rows go in sorted by the unique key, so two runs inserting overlapping sets
-- wait on each other in one order instead of deadlocking. The never-regress
-- comparison sits in the UPDATE's WHERE, which PostgreSQL re-checks against the
-- newest row version if a concurrent run moved it first.
--
-- Periods compare by when they start (duly_period_first_day, migration 0007),
-- so a duty whose frequency changed moves on from its old key: '2026-12'
-- follows '2026-W46', which sorts after it as text. Keys starting on the same
-- day (a week and a fortnight) fall back to their spelling in "C" collation;
-- a stored key nobody can read is replaced. One run's keys for one duty share
-- a frequency, where "C" order (fixed-width ASCII) is already chronological,
-- so the latest of them is their max.
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
-- here as they are in page_write_rerun.sql (the variant for pages whose
-- tasks mostly exist) and page_dry_run.sql; page_taken_ids.sql shares their
-- head and page.
-- duly:include page_owed
inserted AS (
    INSERT INTO duly_task (organization_id, duty_id, owner_id, business_unit_id, subject, source,
                           period_key, due_date, visible_from, late_after)
    SELECT o.organization_id, o.duty_id, o.owner_id, o.business_unit_id, o.subject, o.source,
           o.period_key, o.due_date, o.visible_from, o.late_after
    FROM owed o
    WHERE o.owes
    ORDER BY duty_id COLLATE "C", period_key COLLATE "C"
    ON CONFLICT ON CONSTRAINT duly_task_dispatch_identity DO NOTHING
    RETURNING organization_id, duty_id, period_key
),
-- duly:include page_advance
-- duly:include page_result
-- The page in one row (store.PageResult): its counts, the tasks inserted,
-- the duties whose latest period moved, and the accounts kept.
SELECT c.*,
       (SELECT count(*) FROM inserted) AS created,
       (SELECT count(*) FILTER (WHERE advanced) FROM advanced) AS advanced,
       (SELECT count(*) FILTER (WHERE kept) FROM advanced) AS kept
FROM page_counts c
