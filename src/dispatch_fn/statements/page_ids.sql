-- The duties dispatch_page takes for the same arguments, in page order, every
-- column: page_owed.sql's page CTE alone, for a page the run settles duty by
-- duty because its statement failed (ADR 0003), or whose duties the planner
-- judges first at the calendar's edge (dispatch_fn._edge). Slot: {scope}.
SELECT d.*
FROM duly_duty d
WHERE d.status = 'active' AND d.form = 'recurring' AND d.review_status = 'approved'
  AND (%(after)s::text IS NULL OR d.id > %(after)s)
  AND (%(upto)s::text IS NULL OR d.id <= %(upto)s)
  AND {scope}
  AND d.id <> ALL(%(excluded)s::text[])
ORDER BY d.id
LIMIT %(size)s
