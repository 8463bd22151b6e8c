-- The stored rows of the duties %(duty_ids)s, every column, for explain: the
-- planner judges them exactly as a run would. Of one organisation where
-- %(organization_id)s names one: on a layout keyed by (organization_id, id)
-- an id may repeat across organisations (docs/adr/0005).
SELECT d.*
FROM duly_duty d
WHERE d.id = ANY(%(duty_ids)s)
  AND (%(organization_id)s::text IS NULL OR d.organization_id = %(organization_id)s)
ORDER BY d.id, d.organization_id
