-- Whether any dispatchable duty in the run's scope lies in (%(after)s,
-- %(upto)s] (a null bound is open): asked of the pages a run stopped by its
-- deadline did not take, so that a run whose last page was exactly full
-- reports itself complete.
SELECT EXISTS (
    SELECT 1
    FROM duly_duty d
    WHERE duly_dispatchable(d.status, d.form, d.review_status)
      AND (%(after)s::text IS NULL OR d.id > %(after)s)
      AND (%(upto)s::text IS NULL OR d.id <= %(upto)s)
      AND duly_in_scope(d.id, d.organization_id, %(organization_id)s::text,
                        %(duty_ids)s::text[], %(resume_after)s::text)
      AND duly_read_now(d.id, d.organization_id, d.dispatch_next_at,
                        %(owed_at)s::timestamptz, %(afresh_ids)s::text[],
                        %(afresh_keys)s::text[])
) AS found
