-- The stored rows of the duties a run's pages flagged (page_owed.sql's
-- lapse_probe), every column, by their key: the planner judges the periods
-- older than the run's first candidate with them. An id may repeat across
-- organisations on a layout keyed by (organization_id, id).
SELECT d.*
FROM duly_duty d
JOIN unnest(%(organization_ids)s::text[], %(duty_ids)s::text[]) AS k(organization_id, id)
  ON (d.organization_id, d.id) = (k.organization_id, k.id)
