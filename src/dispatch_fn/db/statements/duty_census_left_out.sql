-- duty_census.sql's 'form' set for a scheduled run that reads only what is
-- owed (docs/contract.md#account): the duties in scope it does not dispatch,
-- counted by the columns plan.classify names the reason from. Its predicate is
-- migration 0014's index duly_duty_left_out's, word for word, and the index
-- carries every column read: an index-only scan, no duty's row read.
SELECT d.form, d.status, d.review_status, count(*) AS duties
FROM duly_duty d
WHERE (d.status IS DISTINCT FROM 'active' OR d.form IS DISTINCT FROM 'recurring'
       OR d.review_status IS DISTINCT FROM 'approved')
  AND duly_in_scope(d.id, d.organization_id, %(organization_id)s::text,
                    %(duty_ids)s::text[], %(resume_after)s::text)
  -- A run its deadline stopped counts what it reached (store.Scope.reach).
  AND (%(reach)s::text IS NULL OR d.id <= %(reach)s::text)
GROUP BY 1, 2, 3
