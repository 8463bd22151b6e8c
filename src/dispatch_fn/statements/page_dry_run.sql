-- Follows page_owed.sql: the same question as page_write.sql without writing —
-- which owed rows are not there yet, and which duties those would advance —
-- reported in the same one row (store.PageResult).
,
missing AS (
    -- One probe of the unique index per owed row, whatever the statistics say
    -- (defect 9, ADR 0003): OFFSET 0 keeps the NOT EXISTS a correlated subplan
    -- rather than an anti-join the planner may turn into a nested loop over a
    -- scan of duly_task, and page_dry_run_plan.sql, run first in the page's
    -- transaction, takes the scan off the table, so the subplan's only path
    -- is the index with the owed row's key as its condition.
    SELECT o.duty_id, o.period_key FROM owed o
    WHERE NOT EXISTS (
        SELECT 1 FROM duly_task t
        WHERE (t.organization_id, t.duty_id, t.owner_id, t.period_key)
            = (o.organization_id, o.duty_id, o.owner_id, o.period_key)
        OFFSET 0)
),
advancing AS (
    SELECT d.id
    FROM duly_duty d,
         (SELECT duty_id, max(period_key COLLATE "C") AS latest
          FROM missing GROUP BY duty_id) i
    WHERE d.id = i.duty_id
      -- page_write.sql's never-regress test, word for word.
      AND (d.last_dispatched_period IS NULL
           OR (coalesce(duly_period_first_day(d.last_dispatched_period), '-infinity'::date),
               d.last_dispatched_period COLLATE "C")
            < (duly_period_first_day(i.latest), i.latest))
)
