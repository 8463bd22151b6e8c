-- The stored rows of the duties %(duty_ids)s, every column, for explain: the
-- planner judges them exactly as a run would.
SELECT d.*
FROM duly_duty d
WHERE d.id = ANY(%(duty_ids)s)
