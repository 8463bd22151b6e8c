-- The rows of the duties %(ids)s that another transaction holds locked against
-- an update, each with whether its id has a row no one holds: on a layout
-- keyed by (organization_id, id) another organisation's duty may share the id
-- (docs/adr/0005), and the run then leaves out the locked row alone
-- (ADR 0003). FOR NO KEY UPDATE is the lock the page's UPDATE of
-- last_dispatched_period takes; the task's foreign key check needs KEY SHARE,
-- which only FOR UPDATE blocks, and this finds those too. SKIP LOCKED answers
-- without waiting: the rows it skips are the locked ones.
-- In autocommit the probe's own locks end with it (ADR 0003). Only the rows
-- the page reads (dispatchable, in the run's scope, read by its clock): a
-- namesake the run never reads is none of its business, locked or not.
WITH read AS NOT MATERIALIZED (
    SELECT d.organization_id, d.id
    FROM duly_duty d
    WHERE d.id = ANY(%(ids)s::text[])
      AND duly_dispatchable(d.status, d.form, d.review_status)
      AND duly_in_scope(d.id, d.organization_id, %(organization_id)s::text,
                        %(duty_ids)s::text[], %(resume_after)s::text)
      AND duly_read_now(d.id, d.organization_id, d.dispatch_next_at,
                        %(owed_at)s::timestamptz, %(afresh_ids)s::text[],
                        %(afresh_keys)s::text[])
),
free AS (
    SELECT d.organization_id, d.id
    FROM duly_duty d
    WHERE (d.organization_id, d.id) IN (SELECT organization_id, id FROM read)
    FOR NO KEY UPDATE SKIP LOCKED
)
SELECT a.organization_id, a.id,
       EXISTS (SELECT FROM free f WHERE f.id = a.id) AS shared
FROM read a
WHERE (a.organization_id, a.id) NOT IN (SELECT organization_id, id FROM free)
