-- Follows page_owed.sql: insert the page's owed tasks, advance
-- last_dispatched_period, and report the page in one row (store.PageResult).
--
-- Rows go in sorted by the unique key, so two runs inserting overlapping sets
-- wait on each other in one order instead of deadlocking. The never-regress
-- comparison sits in the UPDATE's WHERE, which PostgreSQL re-checks against the
-- newest row version if a concurrent run moved it first. Keys compare in "C"
-- collation: fixed-width ASCII, where byte order is chronological order
-- whatever the database's collation says.
,
inserted AS (
    INSERT INTO duly_task (organization_id, duty_id, owner_id, business_unit_id, subject, source,
                           period_key, due_date, visible_from, late_after)
    SELECT * FROM owed ORDER BY duty_id COLLATE "C", period_key COLLATE "C"
    ON CONFLICT ON CONSTRAINT duly_task_dispatch_identity DO NOTHING
    RETURNING duty_id, period_key
),
advanced AS (
    UPDATE duly_duty d SET last_dispatched_period = i.latest
    FROM (SELECT duty_id, max(period_key COLLATE "C") AS latest
          FROM inserted GROUP BY duty_id) i
    WHERE d.id = i.duty_id
      AND (d.last_dispatched_period IS NULL
           OR d.last_dispatched_period COLLATE "C" < i.latest)
    RETURNING d.id
)
