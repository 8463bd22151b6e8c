-- The duly_duty rows, every column, of the duties a page statement's head
-- takes for the same arguments, in page order (page_write.sql's head CTE,
-- before any row budget cuts it): for a page the run settles duty by
-- duty because its statement failed (ADR 0003), or whose duties the planner
-- judges first at the calendar's edge (dispatch_fn.planning.calendar_edge).
SELECT d.*
FROM duly_duty d
WHERE duly_dispatchable(d.status, d.form, d.review_status)
  AND (%(after)s::text IS NULL OR d.id > %(after)s)
  AND (%(upto)s::text IS NULL OR d.id <= %(upto)s)
  AND duly_in_scope(d.id, d.organization_id, %(organization_id)s::text,
                    %(duty_ids)s::text[], %(resume_after)s::text)
  -- The duties a scheduled run reads (docs/contract.md#account).
  AND (%(owed_by)s::date IS NULL OR d.dispatch_next <= %(owed_by)s::date)
  AND d.id <> ALL(%(excluded)s::text[])
-- With ties, as the head takes them: the duties sharing the last one's id.
ORDER BY d.id
FETCH FIRST (%(size)s) ROWS WITH TIES
