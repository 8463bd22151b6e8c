-- How many duties the run's scope holds, whatever their state, as the planner
-- estimates it from its statistics (the plan's rows; nothing is read): a
-- scheduled run that reads only what is owed reports roughly how many it
-- passed over, and a count would read them all. The planner reads the
-- scope's organisation, ids and bounds with their values, and, on the
-- partitioned layout, adds up the partitions'. Asked only once duly_duty
-- has been analysed (duty_analysed.sql).
EXPLAIN (FORMAT JSON)
SELECT 1
FROM duly_duty d
WHERE duly_in_scope(d.id, d.organization_id, %(organization_id)s::text,
                    %(duty_ids)s::text[], %(resume_after)s::text)
  AND (%(reach)s::text IS NULL OR d.id <= %(reach)s::text)
