-- (organization_id, id, form) of every duty in the run's scope whose form is
-- none of %(forms)s: the faults a run lists by id, and keeps on account
-- (faults.record).
SELECT d.organization_id, d.id, d.form
FROM duly_duty d
WHERE (d.form IS NULL OR d.form <> ALL(%(forms)s))
  AND duly_in_scope(d.id, d.organization_id, %(organization_id)s::text,
                    %(duty_ids)s::text[], %(resume_after)s::text)
  -- A run its deadline stopped counts what it reached (store.Scope.reach).
  AND (%(reach)s::text IS NULL OR d.id <= %(reach)s::text)
ORDER BY d.id
