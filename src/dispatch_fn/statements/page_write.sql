-- Follows page_owed.sql: insert the page's owed tasks, advance
-- last_dispatched_period, and report the page in one row (store.PageResult).
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
           OR (coalesce(duly_period_first_day(d.last_dispatched_period), '-infinity'::date),
               d.last_dispatched_period COLLATE "C")
            < (duly_period_first_day(i.latest), i.latest))
    RETURNING d.id
)
