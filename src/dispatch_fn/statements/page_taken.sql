-- Follows page_owed.sql: the ids of the duties its page takes, in page order,
-- and nothing else (the later CTEs are never evaluated). For a page the run
-- settles by halves because its statement failed or ran out of time (ADR
-- 0003, 0009): the same duties, cut by the same row budget.
SELECT id FROM page ORDER BY id
