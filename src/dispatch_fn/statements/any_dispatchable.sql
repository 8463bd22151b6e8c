-- Whether any dispatchable duty in {scope} lies in (%(after)s, %(upto)s] (a
-- null bound is open): asked of the pages a run stopped by its deadline did not
-- take, so that a run whose last page was exactly full reports itself complete.
SELECT EXISTS (
    SELECT 1
    FROM duly_duty d
    WHERE d.status = 'active' AND d.form = 'recurring' AND d.review_status = 'approved'
      AND (%(after)s::text IS NULL OR d.id > %(after)s)
      AND (%(upto)s::text IS NULL OR d.id <= %(upto)s)
      AND {scope}
)
