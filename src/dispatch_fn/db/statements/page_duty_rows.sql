-- The duly_duty rows, every column, of the duties a page statement's head
-- takes for the same arguments, in page order (page_write.sql's head CTE,
-- before any row budget cuts it): for a page the run settles duty by
-- duty because its statement failed (ADR 0003), or whose duties the planner
-- judges first at the calendar's edge (dispatch_fn.planning.calendar_edge).
SELECT d.*
-- duly:include page_keys
ORDER BY d.id
