-- A scoped run's remark: whether its organization_id / duty_ids name any duty
-- at all (dispatchable or not), so that a scope matching nothing is said, not
-- reported as a quiet success. Bound without the resume point.
SELECT EXISTS (
    SELECT 1
    FROM duly_duty d
    WHERE duly_in_scope(d.id, d.organization_id, %(organization_id)s::text,
                        %(duty_ids)s::text[], %(resume_after)s::text)
) AS matched
