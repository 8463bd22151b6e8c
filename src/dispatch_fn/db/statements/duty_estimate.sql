-- How many duties the table holds, as the planner estimates it from the last
-- ANALYZE (pg_class.reltuples, -1 before the first): a scheduled run that
-- reads only what is owed reports roughly how many it passed over, and a
-- count would read them all. On the partitioned layout, its partitions'.
SELECT coalesce(sum(greatest(c.reltuples, 0)), 0)::bigint AS duties
FROM pg_partition_tree('duly_duty'::regclass) t
JOIN pg_class c ON c.oid = t.relid
WHERE t.isleaf
