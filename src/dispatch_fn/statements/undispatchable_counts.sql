-- (form, status, review_status, count) of every duty in {scope} that a run
-- does not dispatch; plan.classify names the reason of each combination.
-- coalesce(..., false): a null status or review makes the predicate null,
-- and such a duty is not dispatchable either.
SELECT d.form, d.status, d.review_status, count(*)
FROM duly_duty d
WHERE NOT coalesce(d.status = 'active' AND d.form = 'recurring'
                   AND d.review_status = 'approved', false)
  AND {scope}
GROUP BY d.form, d.status, d.review_status
