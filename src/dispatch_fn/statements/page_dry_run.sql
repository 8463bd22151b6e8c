-- Follows page_owed.sql: the same question as page_write.sql without writing —
-- which owed rows are not there yet, and which duties those would advance —
-- reported in the same one row (store.PageResult).
,
missing AS (
    SELECT o.duty_id, o.period_key FROM owed o
    WHERE NOT EXISTS (
        SELECT 1 FROM duly_task t
        WHERE (t.organization_id, t.duty_id, t.owner_id, t.period_key)
            = (o.organization_id, o.duty_id, o.owner_id, o.period_key))
),
advancing AS (
    SELECT d.id
    FROM duly_duty d,
         (SELECT duty_id, max(period_key COLLATE "C") AS latest
          FROM missing GROUP BY duty_id) i
    WHERE d.id = i.duty_id
      AND (d.last_dispatched_period IS NULL
           OR d.last_dispatched_period COLLATE "C" < i.latest)
)
