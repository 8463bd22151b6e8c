-- (form, status, review_status, count) of every duty in the run's scope that a
-- run does not dispatch; plan.classify names the reason of each combination.
-- coalesce(..., false): a null status or review makes duly_dispatchable null,
-- and such a duty is not dispatchable either.
SELECT d.form, d.status, d.review_status, count(*)
FROM duly_duty d
WHERE NOT coalesce(duly_dispatchable(d.status, d.form, d.review_status), false)
  AND duly_in_scope(d.id, d.organization_id, %(organization_id)s::text,
                    %(duty_ids)s::text[], %(resume_after)s::text)
GROUP BY d.form, d.status, d.review_status
