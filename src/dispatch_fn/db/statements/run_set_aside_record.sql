-- ledger.record_set_aside: the duties a finished run set aside, one row each,
-- in one autocommit statement after its last page; organization_id: null
-- where the run knew the duty by its id alone; afresh: the run was judging
-- the duty afresh (migration 0022).
INSERT INTO duly_dispatch_set_aside (run_id, duty_id, organization_id, reason, owed_from, afresh)
SELECT %(run_id)s, s.duty_id, s.organization_id, s.reason, %(owed_from)s, s.afresh
FROM unnest(%(duty_ids)s::text[], %(organizations)s::text[], %(reasons)s::text[],
            %(afresh)s::boolean[])
    AS s(duty_id, organization_id, reason, afresh)
ON CONFLICT DO NOTHING
