-- ledger.record_set_aside: the duties a finished run set aside, one row each,
-- in one autocommit statement after its last page, and each whose row the
-- server refused while the run judged it afresh (reason 'refused', migration
-- 0025); organization_id: null
-- where the run knew the duty by its id alone; afresh: the run was judging
-- the duty afresh (migration 0022); owed_from: the run's clock, or, for one
-- judged afresh that an earlier run's judgement was owed, that one's.
INSERT INTO duly_dispatch_set_aside (run_id, duty_id, organization_id, reason, owed_from, afresh)
SELECT %(run_id)s, s.duty_id, s.organization_id, s.reason, s.owed_from, s.afresh
FROM unnest(%(duty_ids)s::text[], %(organizations)s::text[], %(reasons)s::text[],
            %(owed_from)s::timestamptz[], %(afresh)s::boolean[])
    AS s(duty_id, organization_id, reason, owed_from, afresh)
ON CONFLICT DO NOTHING
