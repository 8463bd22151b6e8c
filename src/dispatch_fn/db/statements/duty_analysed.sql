-- Whether the planner has statistics of duly_duty (an ANALYZE, autovacuum's
-- or another's, has counted its rows: reltuples -1 before the first), of the
-- table or, on the partitioned layout, of any partition: store.estimated_duties
-- asks the plan's estimate only then, the planner's guess from an unanalysed
-- table's size being no count at all (130 rows for a table of four).
SELECT coalesce(bool_or(c.reltuples >= 0), false) AS analysed
FROM pg_class c
WHERE c.oid = 'duly_duty'::regclass
   OR c.oid IN (SELECT t.relid FROM pg_partition_tree('duly_duty'::regclass) t WHERE t.isleaf)
