-- The duly_duty rows, every column, of the duties a page statement's head
-- takes for the same arguments, in page order (page_write.sql's head CTE,
-- before any row budget cuts it): for a page the run settles duty by
-- duty because its statement failed (ADR 0003), or whose duties the planner
-- judges first at the calendar's edge (dispatch_fn.planning.calendar_edge).
-- The keys first, from migration 0014's index alone, then each row by its key
-- (page_owed.sql's head says why).
SELECT d.*
FROM (SELECT k.organization_id, k.id
      FROM duly_duty k
      WHERE duly_dispatchable(k.status, k.form, k.review_status)
        AND (%(after)s::text IS NULL OR k.id > %(after)s)
        AND (%(upto)s::text IS NULL OR k.id <= %(upto)s)
        AND duly_in_scope(k.id, k.organization_id, %(organization_id)s::text,
                          %(duty_ids)s::text[], %(resume_after)s::text)
        -- The duties a scheduled run reads (docs/contract.md#account).
        AND (%(owed_by)s::date IS NULL OR k.dispatch_next <= %(owed_by)s::date)
        AND k.id <> ALL(%(excluded)s::text[])
      -- With ties, as the head takes them: the duties sharing the last one's id.
      ORDER BY k.id
      FETCH FIRST (%(size)s) ROWS WITH TIES) key
CROSS JOIN LATERAL (
    SELECT * FROM duly_duty d
    WHERE d.organization_id = key.organization_id AND d.id = key.id
    -- A fence: flattened, the look-up would become a join.
    OFFSET 0) d
ORDER BY d.id
